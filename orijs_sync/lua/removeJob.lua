--[[
  Removes one job and its keys, and with ARGV[4] its children down the tree (in
  whatever queue they are), unless a worker holds its lock (with children: or the
  lock of a child it still waits for), or (with ARGV[3]) unless the job is in one
  of the listed states.
  KEYS[1] job key   KEYS[2] events
  ARGV[1] queue key base   ARGV[2] job id
  ARGV[3] comma-separated state keys the job must be in ("" = any), e.g. "wait,paused,delayed"
  ARGV[4] "1" to remove its children too
  Returns 1 removed, 0 left alone (locked, or not in those states), -1 missing.
]]
local rcall = redis.call
--- @include "remove_tree"

local qk, jobId = ARGV[1], ARGV[2]
if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
local withChildren = ARGV[4] == "1"
if isLockedTree(KEYS[1], withChildren) then return 0 end
if ARGV[3] ~= "" and not isInStates(qk, jobId, ARGV[3]) then return 0 end
removeTree(qk, jobId, withChildren and "all" or "none")
return 1
