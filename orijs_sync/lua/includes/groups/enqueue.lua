--[[
  Adding one job to a group queue, as GroupMQ 1.1's enqueue does: the score is
  (orderMs - 2024-01-01) * 1000 + a per-day sequence, so a group runs by orderMs,
  then by submission. A job id that exists and is not finished is not added twice.
  Returns { id, groupId, data, attempts, maxAttempts, timestamp, orderMs,
  delayUntil, status, existed (0/1) }.
]]
--- @include "groups/core"

local GM_BASE_EPOCH = 1704067200000

local function gmExisting(ns, jobId)
  local f = rcall("HMGET", ns .. ":job:" .. jobId, "id", "groupId", "data", "attempts",
                  "maxAttempts", "timestamp", "orderMs", "delayUntil", "status")
  for i = 1, 9 do
    if not f[i] then f[i] = "" end
  end
  f[10] = 1
  return f
end

-- A job with this id that must not be replaced (live, or kept after finishing)?
local function gmIsLive(ns, jobId, keepCompleted)
  local status = rcall("HGET", ns .. ":job:" .. jobId, "status")
  if not status then return false end
  if status == "completed" or status == "failed" then return keepCompleted > 0 end
  return true
end

-- now: Redis time (ms); job: {groupId, data, maxAttempts, orderMs, delayUntil,
-- jobId, timestamp, orderingDelayMs, keepCompleted}
local function gmEnqueue(ns, now, job)
  local jobId = job.jobId
  local jobKey = ns .. ":job:" .. jobId
  if gmIsLive(ns, jobId, job.keepCompleted) then
    rcall("SET", ns .. ":unique:" .. jobId, jobId)
    return gmExisting(ns, jobId)
  end
  rcall("DEL", jobKey)
  rcall("SET", ns .. ":unique:" .. jobId, jobId)
  local orderMs = job.orderMs
  local seq = rcall("INCR", ns .. ":seq:" .. math.floor(orderMs / 86400000))
  local score = (orderMs - GM_BASE_EPOCH) * 1000 + seq
  local gid = job.groupId
  local gZ = ns .. ":g:" .. gid
  rcall("HSET", jobKey, "id", jobId, "groupId", gid, "data", job.data, "attempts", "0",
        "maxAttempts", tostring(job.maxAttempts), "seq", tostring(seq),
        "timestamp", tostring(job.timestamp), "orderMs", tostring(orderMs),
        "score", string.format("%.0f", score), "delayUntil", tostring(job.delayUntil))
  rcall("SADD", ns .. ":groups", gid)
  local status = "waiting"
  if job.delayUntil > now then
    status = "delayed"
    rcall("HSET", jobKey, "status", status)
    rcall("ZADD", gZ, score, jobId)
    rcall("ZADD", ns .. ":delayed", job.delayUntil, jobId)
  elseif job.orderingDelayMs > 0 then
    status = "staged"
    rcall("HSET", jobKey, "status", status)
    local releaseAt = orderMs + job.orderingDelayMs
    rcall("ZADD", ns .. ":stage", releaseAt, jobId)
    local first = rcall("ZRANGE", ns .. ":stage", 0, 0, "WITHSCORES")
    rcall("SET", ns .. ":stage:timer", "1", "PX", math.max(1, tonumber(first[2]) - now))
  else
    rcall("HSET", jobKey, "status", status)
    rcall("ZADD", gZ, score, jobId)
    if rcall("LLEN", gZ .. ":active") == 0 then gmReadyHead(ns, gid) end
  end
  return { jobId, gid, job.data, "0", tostring(job.maxAttempts), tostring(job.timestamp),
           tostring(orderMs), tostring(job.delayUntil), status, 0 }
end

local function gmRedisNow()
  local t = rcall("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
