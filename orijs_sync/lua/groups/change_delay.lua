--[[
  Change when a waiting or delayed job may run (0 or a past time: now). The
  job keeps its place in its group; while delayed it holds its group back
  once it is the head.

  KEYS[1] ns
  ARGV[1] job id  ARGV[2] new run time (epoch ms, 0 = now)  ARGV[3] now (ms)
  Returns 1, 0 (no such job) or -1 (the job is not waiting or delayed).
]]
local rcall = redis.call
--- @include "groups/core"

local ns, jobId = KEYS[1], ARGV[1]
local runAt, now = tonumber(ARGV[2]), tonumber(ARGV[3])
local jobKey = ns .. ":job:" .. jobId
local gid = rcall("HGET", jobKey, "groupId")
if not gid then return 0 end
if not rcall("ZSCORE", ns .. ":g:" .. gid, jobId) then return -1 end
rcall("HSET", jobKey, "delayUntil", tostring(runAt))
if runAt > now then
  rcall("HSET", jobKey, "status", "delayed", "runAt", tostring(runAt))
  rcall("ZADD", ns .. ":delayed", runAt, jobId)
else
  rcall("HSET", jobKey, "status", "waiting")
  rcall("HDEL", jobKey, "runAt")
  rcall("ZREM", ns .. ":delayed", jobId)
end
if rcall("LLEN", ns .. ":g:" .. gid .. ":active") == 0 then gmReadyHead(ns, gid) end
return 1
