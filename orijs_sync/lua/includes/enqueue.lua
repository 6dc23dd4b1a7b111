--[[
  Putting a job where workers find it: wait/paused list, prioritized set or
  delayed set, with the marker and the event BullMQ emits for each.
]]
--- @include "queue_state"

local function addToPrioritized(markerKey, prioritizedKey, priority, jobId, pcKey, pausedOrMaxed)
  rcall("ZADD", prioritizedKey, getPriorityScore(priority, pcKey), jobId)
  addBaseMarker(markerKey, pausedOrMaxed)
end

local function addToDelayed(markerKey, delayedKey, eventsKey, maxEvents, jobId, timestamp, delay)
  local score, runAt = getDelayedScore(delayedKey, timestamp, delay)
  rcall("ZADD", delayedKey, score, jobId)
  rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "delayed",
        "jobId", jobId, "delay", runAt)
  addDelayMarker(markerKey, delayedKey)
end

-- Pushes a ready job to wait/paused (or prioritized) and wakes a worker. Workers take
-- from the right of the list: front (a lifo job, a parent whose children are done:
-- RPUSH, as BullMQ) makes it the next one taken; else LPUSH, behind every waiting job.
local function pushReady(qk, jobId, priority, front)
  local target, pausedOrMaxed = getTargetList(qk .. "meta", qk .. "active", qk .. "wait", qk .. "paused")
  if priority > 0 then
    addToPrioritized(qk .. "marker", qk .. "prioritized", priority, jobId, qk .. "pc", pausedOrMaxed)
  else
    rcall(front and "RPUSH" or "LPUSH", target, jobId)
    addBaseMarker(qk .. "marker", pausedOrMaxed)
  end
end

-- Moves a job that has no pending delay into wait/paused or prioritized,
-- with the "waiting" event. qk is the queue's key base ("bull:name:"); front: see pushReady.
local function enqueueReadyJob(qk, jobId, priority, front, prevState)
  pushReady(qk, jobId, priority, front)
  local maxEvents = getOrSetMaxEvents(qk .. "meta")
  if prevState then
    rcall("XADD", qk .. "events", "MAXLEN", "~", maxEvents, "*", "event", "waiting",
          "jobId", jobId, "prev", prevState)
  else
    rcall("XADD", qk .. "events", "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId)
  end
end

-- Moves delayed jobs whose time has come (at most 1000 per call).
local function promoteDelayedJobs(qk, timestamp)
  local delayedKey = qk .. "delayed"
  local due = rcall("ZRANGEBYSCORE", delayedKey, 0, (tonumber(timestamp) + 1) * 0x1000 - 1, "LIMIT", 0, 1000)
  if #due == 0 then return end
  rcall("ZREM", delayedKey, unpack(due))
  local target, pausedOrMaxed = getTargetList(qk .. "meta", qk .. "active", qk .. "wait", qk .. "paused")
  for _, jobId in ipairs(due) do
    local jobKey = qk .. jobId
    local priority = storedPriority(rcall("HGET", jobKey, "priority"))
    if priority == 0 then
      rcall("LPUSH", target, jobId)
    else
      rcall("ZADD", qk .. "prioritized", getPriorityScore(priority, qk .. "pc"), jobId)
    end
    rcall("XADD", qk .. "events", "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
    rcall("HSET", jobKey, "delay", 0)
  end
  addBaseMarker(qk .. "marker", pausedOrMaxed)
end
