--[[
  Finishing one active job: completed or failed, lock released, deduplication
  id freed (and a duplicate kept meanwhile added), parent updated (flows), the
  finished set trimmed per keepJobs, events emitted.
]]
--- @include "remove_job"
--- @include "dedup"
--- @include "lock"
--- @include "stored"

-- Returns the id of the job's completed/failed event in the stream, or -1 missing
-- job, -2 missing lock, -3 not active, -4 pending children, -6 lock held by another
-- token, -9 failed children.
local function finishJob(qk, jobId, timestamp, target, value, token, fieldsJson, keep, attempts)
  local jobKey = qk .. jobId
  local eventsKey = qk .. "events"
  if rcall("EXISTS", jobKey) ~= 1 then return -1 end
  if target == "completed" then
    if rcall("SCARD", jobKey .. ":dependencies") ~= 0 then return -4 end
    if rcall("ZCARD", jobKey .. ":unsuccessful") ~= 0 then return -9 end
  end
  local code = takeFromActive(jobKey, qk .. "active", qk .. "stalled", jobId, token, fieldsJson)
  if code < 0 then return code end

  local attrs = rcall("HMGET", jobKey, "parentKey", "parent", "deid")
  if attrs[3] then finishDeduplicated(qk, jobId, attrs[3], timestamp) end
  if attrs[1] then
    if target == "completed" then
      onChildCompleted(attrs[1], jobKey, value, timestamp)
    else
      onChildFailed(attrs[2], jobKey, value, timestamp)
    end
  end

  local field = target == "completed" and "returnvalue" or "failedReason"
  local attemptsMade = raiseCounter(jobKey, "atm")
  local keepCount = keep["count"]
  if keepCount == 0 then
    if attrs[1] then removeFromParent(jobKey) end
    removeJobKeys(jobKey)
  else
    local setKey = qk .. target
    rcall("ZADD", setKey, timestamp, jobId)
    rcall("HSET", jobKey, field, value, "finishedOn", timestamp)
    if target == "failed" then rcall("HDEL", jobKey, "defa") end
    if keep["age"] then
      removeJobsByMaxAge(qk, setKey, timestamp, keep["age"], keep["limit"] or 1000)
    end
    if keepCount and keepCount > 0 then
      removeJobsByMaxCount(qk, setKey, keepCount)
    end
  end

  local eventId = rcall("XADD", eventsKey, "*", "event", target, "jobId", jobId, field, value,
                        "prev", "active")
  if target == "failed" and tonumber(attemptsMade) >= (tonumber(attempts) or 1) then
    rcall("XADD", eventsKey, "*", "event", "retries-exhausted", "jobId", jobId,
          "attemptsMade", attemptsMade)
  end
  return eventId
end
