--[[
  Puts an active job back at the head of the line without counting an
  attempt (a handler hit the rate limit).

  KEYS[1] job key   KEYS[2] active   KEYS[3] stalled   KEYS[4] limiter
  ARGV[1] queue key base   ARGV[2] job id   ARGV[3] token
  Returns the limiter's remaining ms (>= 0), or -1/-2/-6 as the other moves.
]]
local rcall = redis.call
--- @include "queue_state"
--- @include "lock"

local qk, jobId = ARGV[1], ARGV[2]
if rcall("EXISTS", KEYS[1]) == 0 then return -1 end
local code = releaseLock(KEYS[1], KEYS[3], jobId, ARGV[3])
if code < 0 then return code end
if rcall("LREM", KEYS[2], 1, jobId) > 0 then
  local target, pausedOrMaxed = getTargetList(qk .. "meta", KEYS[2], qk .. "wait", qk .. "paused")
  local priority = storedPriority(rcall("HGET", KEYS[1], "priority"))
  if priority > 0 then
    -- Ahead of every job of the same priority.
    rcall("ZADD", qk .. "prioritized", priority * 0x100000000, jobId)
  else
    rcall("RPUSH", target, jobId)
  end
  addBaseMarker(qk .. "marker", pausedOrMaxed)
  rcall("XADD", qk .. "events", "MAXLEN", "~", getOrSetMaxEvents(qk .. "meta"), "*",
        "event", "waiting", "jobId", jobId, "prev", "active")
end
return math.max(rcall("PTTL", KEYS[4]), 0)
