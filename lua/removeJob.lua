--[[
  Removes one job and its keys, unless a worker holds its lock, or (with
  ARGV[3]) unless the job is in one of the listed states.
  KEYS[1] job key   KEYS[2] events
  ARGV[1] queue key base   ARGV[2] job id
  ARGV[3] comma-separated state keys the job must be in ("" = any), e.g. "wait,paused,delayed"
  Returns 1 removed, 0 left alone (locked, or not in those states), -1 missing.
]]
local rcall = redis.call
--- @include "remove_job"
--- @include "remove_any"

local qk, jobId = ARGV[1], ARGV[2]
if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
if rcall("EXISTS", KEYS[1] .. ":lock") == 1 then return 0 end
if ARGV[3] ~= "" and not isInStates(qk, jobId, ARGV[3]) then return 0 end
local prev = removeFromAnyState(qk, jobId) or "unknown"
removeJob(qk, jobId, true)
rcall("XADD", KEYS[2], "*", "event", "removed", "jobId", jobId, "prev", prev)
return 1
