--[[
  The stalled-jobs check, at most once per interval across all workers.
  Jobs still in the "stalled" set since the last check and without a lock
  go back to wait (head of the line) with a "stalled" event; past the max
  stalled count they carry a deferred failure that the next worker applies.
  Then every active job is marked as a candidate for the next check.

  KEYS[1] stalled   KEYS[2] wait   KEYS[3] active   KEYS[4] stalled-check
  KEYS[5] meta      KEYS[6] paused KEYS[7] marker   KEYS[8] events   KEYS[9] repeat
  ARGV[1] max stalled count   ARGV[2] queue key base   ARGV[3] timestamp
  ARGV[4] check interval (ms)
  Returns the ids moved back.
]]
local rcall = redis.call
--- @include "queue_state"
--- @include "stored"

if rcall("EXISTS", KEYS[4]) == 1 then return {} end
rcall("SET", KEYS[4], ARGV[3], "PX", ARGV[4])
trimEvents(KEYS[5], KEYS[8])
local maxStalled = tonumber(ARGV[1])
local qk = ARGV[2]
local moved = {}
local candidates = rcall("SMEMBERS", KEYS[1])
if #candidates > 0 then
  rcall("DEL", KEYS[1])
  for _, jobId in ipairs(candidates) do
    local jobKey = qk .. jobId
    if string.sub(jobId, 1, 2) == "0:" then
      rcall("LREM", KEYS[3], 1, jobId)
    elseif rcall("EXISTS", jobKey .. ":lock") == 0 and rcall("LREM", KEYS[3], 1, jobId) > 0 then
      local count = raiseCounter(jobKey, "stc")
      local scheduler = rcall("HGET", jobKey, "rjk")
      local repeatable = scheduler and (rcall("EXISTS", KEYS[9] .. ":" .. scheduler) == 1
                                        or rcall("ZSCORE", KEYS[9], scheduler))
      if count > maxStalled and not repeatable then
        rcall("HSET", jobKey, "defa", "job stalled more than allowable limit")
      end
      local target, pausedOrMaxed = getTargetList(KEYS[5], KEYS[3], KEYS[2], KEYS[6])
      rcall("RPUSH", target, jobId)
      addBaseMarker(KEYS[7], pausedOrMaxed)
      rcall("XADD", KEYS[8], "*", "event", "waiting", "jobId", jobId, "prev", "active")
      rcall("XADD", KEYS[8], "*", "event", "stalled", "jobId", jobId)
      table.insert(moved, jobId)
    end
  end
end
local active = rcall("LRANGE", KEYS[3], 0, -1)
for i = 1, #active, 5000 do
  rcall("SADD", KEYS[1], unpack(active, i, math.min(i + 4999, #active)))
end
return moved
