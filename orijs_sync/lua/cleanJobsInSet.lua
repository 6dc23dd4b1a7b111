--[[
  Removes up to ARGV[4] jobs of one state that are older than the grace
  period (finished before it for completed/failed, added before it otherwise).
  Locked (active) jobs are left alone.
  KEYS[1] the state's key   KEYS[2] events
  ARGV[1] queue key base   ARGV[2] state   ARGV[3] cutoff timestamp (ms)   ARGV[4] limit (0 = all)
  Returns the removed ids.
]]
local rcall = redis.call
--- @include "remove_job"

local qk, state, cutoff, limit = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local isList = state == "wait" or state == "paused" or state == "active"
local candidates
if state == "completed" or state == "failed" then
  candidates = rcall("ZRANGEBYSCORE", KEYS[1], "-inf", cutoff)
elseif isList then
  candidates = rcall("LRANGE", KEYS[1], 0, -1)
else
  candidates = rcall("ZRANGE", KEYS[1], 0, -1)
end
local removed = {}
for _, jobId in ipairs(candidates) do
  if limit > 0 and #removed >= limit then break end
  local jobKey = qk .. jobId
  if rcall("EXISTS", jobKey .. ":lock") == 0 then
    local stamp = tonumber(rcall("HGET", jobKey, "timestamp") or 0) or 0
    if state == "completed" or state == "failed" or stamp <= cutoff then
      if isList then rcall("LREM", KEYS[1], 0, jobId) else rcall("ZREM", KEYS[1], jobId) end
      removeJob(qk, jobId, true)
      table.insert(removed, jobId)
    end
  end
end
rcall("XADD", KEYS[2], "*", "event", "cleaned", "count", #removed)
return removed
