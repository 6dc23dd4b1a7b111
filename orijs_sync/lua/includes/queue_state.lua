--[[
  Queue-level helpers: events length, target list (wait or paused), markers,
  and the score encodings of the prioritized and delayed sets.
]]
--- @include "stored"

-- A queue setting of the meta hash as a whole number >= 0, or nil: what another
-- program wrote that is none ("", "abc", "1.5", "nan") counts as unset, so one bad
-- field never makes every call of the queue fail.
local function metaCount(value)
  local n = finiteNumber(value)
  if n and n >= 0 and n < 2^53 and n == math.floor(n) then return n end
end

local function getOrSetMaxEvents(metaKey)
  local stored = rcall("HGET", metaKey, "opts.maxLenEvents")
  if not stored then
    rcall("HSET", metaKey, "opts.maxLenEvents", 10000)
  end
  return metaCount(stored) or 10000
end

local function trimEvents(metaKey, eventsKey)
  rcall("XTRIM", eventsKey, "MAXLEN", "~", getOrSetMaxEvents(metaKey))
end

-- Returns the list new jobs go to, whether the queue is paused or at its
-- global concurrency, and the queue-level rate limit (max, duration).
local function getTargetList(metaKey, activeKey, waitKey, pausedKey)
  local attrs = rcall("HMGET", metaKey, "paused", "concurrency", "max", "duration")
  local concurrency, max, duration = metaCount(attrs[2]), metaCount(attrs[3]), metaCount(attrs[4])
  if attrs[1] then
    return pausedKey, true, max, duration
  end
  if concurrency and rcall("LLEN", activeKey) >= concurrency then
    return waitKey, true, max, duration
  end
  return waitKey, false, max, duration
end

local function isPausedOrMaxed(metaKey, activeKey)
  local _, pausedOrMaxed = getTargetList(metaKey, activeKey, "", "")
  return pausedOrMaxed
end

-- Workers block on the marker zset: member "0" (score 0) means "a job is ready".
local function addBaseMarker(markerKey, pausedOrMaxed)
  if not pausedOrMaxed then
    rcall("ZADD", markerKey, 0, "0")
  end
end

-- Delayed scores are timestamp * 4096 plus a sequence in the low 12 bits.
local function getNextDelayedTimestamp(delayedKey)
  local first = rcall("ZRANGE", delayedKey, 0, 0, "WITHSCORES")
  local score = tonumber(first[2])
  if score ~= nil then
    return math.floor(score / 0x1000)
  end
end

-- Member "1" of the marker carries the next delayed timestamp as its score.
local function addDelayMarker(markerKey, delayedKey)
  local nextTimestamp = getNextDelayedTimestamp(delayedKey)
  if nextTimestamp ~= nil then
    rcall("ZADD", markerKey, nextTimestamp, "1")
  end
end

-- A job's stored priority as a number a score can hold: a field another program
-- wrote that is no finite number ("nan", "1e400") is 0, as a missing one is.
local function storedPriority(value)
  return finiteNumber(value) or 0
end

local function getPriorityScore(priority, pcKey)
  local counter = rcall("INCR", pcKey)
  return priority * 0x100000000 + counter % 0x100000000
end

local function getDelayedScore(delayedKey, timestamp, delay)
  local runAt = tonumber(timestamp) + (delay > 0 and delay or 0)
  local minScore = runAt * 0x1000
  local maxScore = (runAt + 1) * 0x1000 - 1
  local last = rcall("ZREVRANGEBYSCORE", delayedKey, maxScore, minScore, "WITHSCORES", "LIMIT", 0, 1)
  local current = tonumber(last[2])
  if current ~= nil then
    return math.min(current + 1, maxScore), runAt
  end
  return minScore, runAt
end
