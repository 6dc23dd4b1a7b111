--[[
  A handler failed: count the attempt; with attempts left, put the job back at
  its place in its group (its score is kept, so the group's order holds), after
  a backoff during which the delayed head holds the group back; with none
  left, fail it for good (kept in failed when keepFailed > 0). Either way the
  group is released. An attempts cap (a worker's maxAttempts; 1 dead-letters the
  job) ends it for good once that many attempts were made, whatever the job's own
  maxAttempts.

  KEYS[1] ns
  ARGV[1] job id  ARGV[2] group id  ARGV[3] token  ARGV[4] now (ms)
  ARGV[5] backoff (ms)  ARGV[6] keepFailed  ARGV[7] error message
  ARGV[8] error name  ARGV[9] stack  ARGV[10] processedOn (ms)
  ARGV[11] attempts cap (0 or absent = none)
  Returns {0} when the job was no longer ours, else {"retry" | "failed", attempts}.
]]
local rcall = redis.call
--- @include "groups/core"
--- @include "stored"

local ns, jobId, gid, token = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local now, backoff = tonumber(ARGV[4]), tonumber(ARGV[5])
if not gmRelease(ns, jobId, gid, token) then return {0} end
local jobKey = ns .. ":job:" .. jobId
local attempts = raiseCounter(jobKey, "attempts")
local maxAttempts = finiteNumber(rcall("HGET", jobKey, "maxAttempts")) or 1
local message, name, stack = ARGV[7], ARGV[8], ARGV[9]
local cap = tonumber(ARGV[11]) or 0
if attempts >= maxAttempts or (cap > 0 and attempts >= cap) then
  gmRecordFinished(ns, jobId, "failed", now, tonumber(ARGV[6]), {
    "failedReason", message, "failedName", name, "stacktrace", stack,
    "processedOn", ARGV[10], "finishedOn", tostring(now), "attempts", tostring(attempts)})
  gmReadyHead(ns, gid)
  return {"failed", attempts}
end
rcall("HSET", jobKey, "lastErrorMessage", message, "lastErrorName", name,
      "lastErrorStack", stack, "processedOn", ARGV[10], "finishedOn", tostring(now))
rcall("ZADD", ns .. ":g:" .. gid, gmScore(jobKey), jobId)
rcall("SADD", ns .. ":groups", gid)
if backoff > 0 then
  rcall("HSET", jobKey, "status", "delayed", "runAt", tostring(now + backoff))
  rcall("ZADD", ns .. ":delayed", now + backoff, jobId)
else
  rcall("HSET", jobKey, "status", "waiting")
end
gmReadyHead(ns, gid)
return {"retry", attempts}
