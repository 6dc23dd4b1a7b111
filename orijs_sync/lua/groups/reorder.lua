--[[
  Ordering method "in-memory", at the end of a worker's grace collection: when
  the group's head (not delayed) sorts before the job the worker holds (an
  earlier orderMs that arrived late), the held job goes back to its place and the
  head becomes the group's active job for the same worker.

  KEYS[1] ns
  ARGV[1] held job id  ARGV[2] group id  ARGV[3] the held run's token  ARGV[4] now (ms)
  ARGV[5] visibility timeout (ms)  ARGV[6] reservation token of the job taken instead
  Returns the reply of the job to run instead, or an empty list to keep the held job.
]]
local rcall = redis.call
--- @include "groups/core"

local ns, jobId, gid, token = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local jobKey = ns .. ":job:" .. jobId
local head = rcall("ZRANGE", ns .. ":g:" .. gid, 0, 0, "WITHSCORES")
if #head == 0 or tonumber(head[2]) >= gmScore(jobKey)
   or rcall("HGET", ns .. ":job:" .. head[1], "status") == "delayed" then
  return {}
end
if not gmRelease(ns, jobId, gid, token) then return {} end
rcall("HSET", jobKey, "status", "waiting")
rcall("ZADD", ns .. ":g:" .. gid, gmScore(jobKey), jobId)
local job = gmTakeHead(ns, gid, tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6])
return job or {}
