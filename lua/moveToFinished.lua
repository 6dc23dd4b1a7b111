--[[
  Moves an active job to completed or failed, releases its lock, updates its
  parent (flows), trims the finished set, and may take the next job.

  KEYS[1] job key   KEYS[2] active   KEYS[3] events   KEYS[4] meta
  KEYS[5] completed or failed set     KEYS[6] stalled
  ARGV[1] queue key base
  ARGV[2] job id
  ARGV[3] timestamp (ms)
  ARGV[4] "completed" | "failed"
  ARGV[5] return value (JSON text) or failed reason
  ARGV[6] "1" to fetch the next job
  ARGV[7] JSON {token, keepJobs = {count, age, limit}, attempts, lockDuration, limiter, name, nextToken}
  ARGV[8] JSON list of extra job fields to set [field, value, ...]
  Returns 0, or {fields, jobId, token} of the next job, or a negative code:
  -1 missing job, -2 missing lock, -3 not active, -4 pending children,
  -6 lock owned by another token, -9 failed children.
]]
local rcall = redis.call
--- @include "activate"
--- @include "remove_job"
--- @include "lock"

local jobKey = KEYS[1]
local qk, jobId, timestamp, target = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if rcall("EXISTS", jobKey) ~= 1 then return -1 end
if target == "completed" then
  if rcall("SCARD", jobKey .. ":dependencies") ~= 0 then return -4 end
  if rcall("ZCARD", jobKey .. ":unsuccessful") ~= 0 then return -9 end
end
local opts = cjson.decode(ARGV[7])
local code = takeFromActive(jobKey, KEYS[2], KEYS[6], jobId, opts["token"], ARGV[8])
if code < 0 then return code end

trimEvents(KEYS[4], KEYS[3])
local attrs = rcall("HMGET", jobKey, "parentKey", "parent", "deid")
if attrs[3] then
  local pttl = rcall("PTTL", qk .. "de:" .. attrs[3])
  if pttl == -1 or pttl == 0 then removeDeduplicationKey(qk, jobId, attrs[3]) end
end
if attrs[1] then
  if target == "completed" then
    onChildCompleted(attrs[1], jobKey, ARGV[5], timestamp)
  else
    onChildFailed(attrs[2], jobKey, ARGV[5], timestamp)
  end
end

local field = target == "completed" and "returnvalue" or "failedReason"
local attemptsMade = rcall("HINCRBY", jobKey, "atm", 1)
local keep = opts["keepJobs"] or {}
local keepCount = keep["count"]
if keepCount == 0 then
  if attrs[1] then removeFromParent(jobKey) end
  removeJobKeys(jobKey)
else
  rcall("ZADD", KEYS[5], timestamp, jobId)
  rcall("HSET", jobKey, field, ARGV[5], "finishedOn", timestamp)
  if target == "failed" then rcall("HDEL", jobKey, "defa") end
  if keep["age"] then
    removeJobsByMaxAge(qk, KEYS[5], timestamp, keep["age"], keep["limit"] or 1000)
  end
  if keepCount and keepCount > 0 then
    removeJobsByMaxCount(qk, KEYS[5], keepCount)
  end
end

rcall("XADD", KEYS[3], "*", "event", target, "jobId", jobId, field, ARGV[5], "prev", "active")
if target == "failed" and tonumber(attemptsMade) >= (tonumber(opts["attempts"]) or 1) then
  rcall("XADD", KEYS[3], "*", "event", "retries-exhausted", "jobId", jobId, "attemptsMade", attemptsMade)
end

if ARGV[6] == "1" then
  opts["token"] = opts["nextToken"]
  local nextJob = fetchNextJob(qk, timestamp, opts)
  if nextJob[2] ~= 0 then
    return {nextJob[1], nextJob[2], opts["token"]}
  end
end
if rcall("LLEN", qk .. "wait") == 0 and rcall("LLEN", KEYS[2]) == 0
   and rcall("ZCARD", qk .. "prioritized") == 0 then
  rcall("XADD", KEYS[3], "*", "event", "drained")
end
return 0
