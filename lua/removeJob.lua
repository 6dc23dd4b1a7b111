--[[
  Removes one job and its keys, unless a worker holds its lock.
  KEYS[1] job key   KEYS[2] events
  ARGV[1] queue key base   ARGV[2] job id
  Returns 1 removed, 0 locked (left alone), -1 missing.
]]
local rcall = redis.call
--- @include "remove_job"
--- @include "remove_any"

local qk, jobId = ARGV[1], ARGV[2]
if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
if rcall("EXISTS", KEYS[1] .. ":lock") == 1 then return 0 end
local prev = removeFromAnyState(qk, jobId) or "unknown"
removeJob(qk, jobId, true)
rcall("XADD", KEYS[2], "*", "event", "removed", "jobId", jobId, "prev", prev)
return 1
