--[[
  Put a failed job back at its place in its group with its attempts reset.

  KEYS[1] ns
  ARGV[1] job id
  Returns 1, 0 (no such job) or -1 (the job is not failed).
]]
local rcall = redis.call
--- @include "groups/core"

local ns, jobId = KEYS[1], ARGV[1]
local jobKey = ns .. ":job:" .. jobId
local f = rcall("HMGET", jobKey, "groupId", "score", "status")
if not f[1] then return 0 end
if f[3] ~= "failed" then return -1 end
rcall("ZREM", ns .. ":failed", jobId)
rcall("HDEL", jobKey, "failedReason", "failedName", "stacktrace", "finishedOn", "processedOn",
      "lastErrorMessage", "lastErrorName", "lastErrorStack", "stalledCount")
rcall("HSET", jobKey, "status", "waiting", "attempts", "0")
rcall("SET", ns .. ":unique:" .. jobId, jobId)
rcall("ZADD", ns .. ":g:" .. f[1], f[2], jobId)
rcall("SADD", ns .. ":groups", f[1])
if rcall("LLEN", ns .. ":g:" .. f[1] .. ":active") == 0 then gmReadyHead(ns, f[1]) end
return 1
