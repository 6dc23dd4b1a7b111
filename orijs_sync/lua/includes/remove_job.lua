--[[
  Removing finished jobs: one job (with its parent link and deduplication
  key), or the oldest of a finished set by age or count.
]]
--- @include "parents"

-- Frees the deduplication id when it names the removed job, with the duplicate
-- kept for it (keepLastIfActive), as BullMQ does.
local function removeDeduplicationKey(qk, jobId, deduplicationId)
  if deduplicationId then
    local key = qk .. "de:" .. deduplicationId
    if rcall("GET", key) == jobId then
      rcall("DEL", key, qk .. "dn:" .. deduplicationId)
    end
  end
end

local function removeJob(qk, jobId, removeDedupKey)
  local jobKey = qk .. jobId
  removeFromParent(jobKey)
  if removeDedupKey then
    removeDeduplicationKey(qk, jobId, rcall("HGET", jobKey, "deid"))
  end
  removeJobKeys(jobKey)
end

local function removeJobsByMaxAge(qk, setKey, timestamp, maxAge, limit)
  local cutoff = tonumber(timestamp) - maxAge * 1000
  local ids = rcall("ZRANGEBYSCORE", setKey, "-inf", cutoff, "LIMIT", 0, limit)
  for _, jobId in ipairs(ids) do
    removeJob(qk, jobId, false)
    rcall("ZREM", setKey, jobId)
  end
end

local function removeJobsByMaxCount(qk, setKey, maxCount)
  local ids = rcall("ZREVRANGE", setKey, maxCount, -1)
  for _, jobId in ipairs(ids) do
    removeJob(qk, jobId, false)
  end
  if #ids > 0 then
    rcall("ZREMRANGEBYRANK", setKey, 0, -(maxCount + 1))
  end
end
