--[[
  Removes a job scheduler and its run that no worker has taken yet.

  KEYS[1] repeat zset   KEYS[2] events
  ARGV[1] queue key base ("bull:name:")   ARGV[2] scheduler id
  Returns 1 when the scheduler existed, 0 otherwise.
]]
local rcall = redis.call
--- @include "scheduler"

local repeatKey, qk, schedulerId = KEYS[1], ARGV[1], ARGV[2]
local millis = rcall("ZSCORE", repeatKey, schedulerId)
if millis then
  local jobId = schedulerJobId(schedulerId, tonumber(millis))
  local state = removePendingRun(qk, jobId)
  if state then
    rcall("XADD", KEYS[2], "*", "event", "removed", "jobId", jobId, "prev", state)
  end
end
if rcall("ZREM", repeatKey, schedulerId) == 1 then
  rcall("DEL", repeatKey .. ":" .. schedulerId)
  return 1
end
return 0
