--[[
  Retries a finished job (job.retry()): completed or failed -> wait, with
  its result cleared and its parent waiting for it again.
  KEYS[1] job key   ARGV[1] queue key base   ARGV[2] job id
  ARGV[3] "completed" | "failed"   ARGV[4] "1" to reset attemptsMade   ARGV[5] "1" to reset attemptsStarted
  Returns 0, -1 (missing job) or -3 (not in that state).
]]
local rcall = redis.call
--- @include "enqueue"

local jobKey, qk, jobId, state = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if rcall("EXISTS", jobKey) ~= 1 then return -1 end
if rcall("ZREM", qk .. state, jobId) ~= 1 then return -3 end
local drop = {"finishedOn", "processedOn", state == "failed" and "failedReason" or "returnvalue"}
if ARGV[4] == "1" then table.insert(drop, "atm") end
if ARGV[5] == "1" then table.insert(drop, "ats") end
rcall("HDEL", jobKey, unpack(drop))
local parentKey = rcall("HGET", jobKey, "parentKey")
if parentKey and rcall("EXISTS", parentKey) == 1 then
  local wasCounted
  if state == "failed" then
    wasCounted = rcall("ZREM", parentKey .. ":unsuccessful", jobKey) == 1
                 or rcall("HDEL", parentKey .. ":failed", jobKey) == 1
  else
    wasCounted = rcall("HDEL", parentKey .. ":processed", jobKey) == 1
  end
  if wasCounted then rcall("SADD", parentKey .. ":dependencies", jobKey) end
end
local lifo = cjson.decode(rcall("HGET", jobKey, "opts") or "{}")["lifo"]
enqueueReadyJob(qk, jobId, storedPriority(rcall("HGET", jobKey, "priority")), lifo, state)
return 0
