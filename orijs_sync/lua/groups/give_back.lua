--[[
  A worker gives a job back without running it to the end (process mode: its
  child process was stopped as the worker closed): no attempt is counted; the
  job leaves processing and its group's active slot and goes back to its place
  in its group (its score is kept, so the group's order holds), waiting; the
  group is ready again.

  KEYS[1] ns
  ARGV[1] job id  ARGV[2] group id  ARGV[3] token
  Returns 1, or 0 when the job was no longer ours.
]]
local rcall = redis.call
--- @include "groups/core"

local ns, jobId, gid, token = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if not gmRelease(ns, jobId, gid, token) then return 0 end
local jobKey = ns .. ":job:" .. jobId
rcall("HSET", jobKey, "status", "waiting")
rcall("ZADD", ns .. ":g:" .. gid, gmScore(jobKey), jobId)
rcall("SADD", ns .. ":groups", gid)
gmReadyHead(ns, gid)
return 1
