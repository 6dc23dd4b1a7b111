--[[
  Finish an active job (completed, or failed for good) and, in the same call,
  reserve the next job of its group for the same worker (GroupMQ's
  complete-and-reserve-next), so no other worker slips in between.

  KEYS[1] ns
  ARGV[1] job id  ARGV[2] group id  ARGV[3] token  ARGV[4] "completed" | "failed"
  ARGV[5] finishedOn (ms)  ARGV[6] keep (keepCompleted or keepFailed)
  ARGV[7] JSON list of hash fields to record (field, value, ...)
  ARGV[8] now (ms)  ARGV[9] visibility timeout (ms)  ARGV[10] take the next job (1/0)
  Returns {0} when the job was no longer ours (stalled and recovered, removed),
  {1} when finished, {1, next job reply} when the next job was reserved too.
]]
local rcall = redis.call
--- @include "groups/core"

local ns, jobId, gid, token = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if not gmRelease(ns, jobId, gid, token) then return {0} end
gmRecordFinished(ns, jobId, ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]),
                 cjson.decode(ARGV[7]))
if ARGV[10] == "1" and rcall("EXISTS", ns .. ":paused") == 0 then
  local nextJob = gmTakeHead(ns, gid, tonumber(ARGV[8]), tonumber(ARGV[9]), token)
  if nextJob then return {1, nextJob} end
end
gmReadyHead(ns, gid)
return {1}
