--[[
  Taking the next job: promote due delayed jobs, honour pause, global
  concurrency and the rate limiter, pop from wait (else prioritized), lock
  the job and return its fields (and, when opts.children is set, the return
  values of its completed children: its processed hash).
  Returns {fields, jobId, rateLimitTtl, nextDelayedTimestamp, children, more}
  (more: a take left jobs waiting).
]]
--- @include "enqueue"
--- @include "stored"
--- @include "rate_limit"

-- Jobs left to take (in wait or prioritized)?
local function jobsWaiting(qk)
  return rcall("LLEN", qk .. "wait") > 0 or rcall("ZCARD", qk .. "prioritized") > 0
end

local function prepareJobForProcessing(qk, jobId, timestamp, maxJobs, limiterDuration, opts)
  local jobKey = qk .. jobId
  if maxJobs then
    if tonumber(rcall("INCR", qk .. "limiter")) == 1 then
      rcall("PEXPIRE", qk .. "limiter", math.floor(math.abs(limiterDuration)))
    end
  end
  rcall("SET", jobKey .. ":lock", opts["token"], "PX", opts["lockDuration"])
  rcall("XADD", qk .. "events", "*", "event", "active", "jobId", jobId, "prev", "waiting")
  if opts["name"] then
    rcall("HSET", jobKey, "processedOn", timestamp, "pb", opts["name"])
  else
    rcall("HSET", jobKey, "processedOn", timestamp)
  end
  raiseCounter(jobKey, "ats")
  -- Wake another worker when more jobs wait; with none left, drop the base marker,
  -- which would only wake a worker (or this one's fetcher) to find nothing.
  local more = jobsWaiting(qk)
  if more then
    addBaseMarker(qk .. "marker", false)
  else
    rcall("ZREM", qk .. "marker", "0")
  end
  local children = {}
  if opts["children"] then
    children = rcall("HGETALL", jobKey .. ":processed")
  end
  return {rcall("HGETALL", jobKey), jobId, 0, 0, children, more}
end

-- After a take that left nothing waiting, a caller wanting more jobs stops: this
-- does what one more fetchNextJob would (it would find wait and prioritized empty,
-- promote nothing new at the same timestamp) and returns its next delayed
-- timestamp, without the pass (a third of a lone job's take).
local function nothingLeft(qk)
  rcall("DEL", qk .. "pc")
  return getNextDelayedTimestamp(qk .. "delayed") or 0
end

-- The lock token of the i-th job a call takes: BullMQ's "{worker id}:{n}", n counted
-- by the worker from opts.tokenStart (it reserved as many as it asked for); or the
-- caller's own token, opts.fixedToken (a manual take: Worker.get_next_job).
local function tokenAt(opts, i)
  return opts["fixedToken"] or (opts["tokenBase"] .. string.format("%d", opts["tokenStart"] + i - 1))
end

local function popPrioritized(qk)
  local popped = rcall("ZPOPMIN", qk .. "prioritized")
  if #popped > 0 then
    rcall("LPUSH", qk .. "active", popped[1])
    return popped[1]
  end
  rcall("DEL", qk .. "pc")
end

local function fetchNextJob(qk, timestamp, opts)
  local target, pausedOrMaxed, queueMax, queueDuration =
    getTargetList(qk .. "meta", qk .. "active", qk .. "wait", qk .. "paused")
  promoteDelayedJobs(qk, timestamp)
  local limiter = opts["limiter"]
  local maxJobs = tonumber(queueMax or (limiter and limiter["max"]))
  local duration = tonumber((limiter and limiter["duration"]) or queueDuration)
  if not duration then maxJobs = nil end      -- a limit without its window limits nothing
  -- opts.limited: a worker without a limiter that hit a manual rate limit waits it out
  local ttl = rateLimitTtl(maxJobs or (opts["limited"] and MANUAL_RATE_LIMIT), qk .. "limiter")
  if ttl > 0 then return {0, 0, ttl, 0} end
  if pausedOrMaxed then return {0, 0, 0, 0} end
  local jobId = rcall("RPOPLPUSH", qk .. "wait", qk .. "active")
  -- "0:..." entries are legacy markers some BullMQ versions put in wait.
  if jobId and string.sub(jobId, 1, 2) == "0:" then
    rcall("LREM", qk .. "active", 1, jobId)
    jobId = rcall("RPOPLPUSH", qk .. "wait", qk .. "active")
  end
  if not jobId then
    jobId = popPrioritized(qk)
  end
  if jobId then
    return prepareJobForProcessing(qk, jobId, timestamp, maxJobs, duration, opts)
  end
  -- Nothing to take: the base marker (left by the last take, "there may be more")
  -- is stale; a job added later sets it again. Without this every worker blocked
  -- on the marker would wake to find nothing.
  rcall("ZREM", qk .. "marker", "0")
  return {0, 0, 0, getNextDelayedTimestamp(qk .. "delayed") or 0}
end

-- Whether a lock token is one of opts.lost: {{tokenStart, count}, ...} of opts.tokenBase,
-- the tokens of this worker's calls whose reply never came back.
local function lostToken(opts, lock)
  local base = opts["tokenBase"]
  if not lock or string.sub(lock, 1, #base) ~= base then return false end
  local n = tonumber(string.sub(lock, #base + 1))
  if not n then return false end
  for _, range in ipairs(opts["lost"]) do
    if n >= range[1] and n < range[1] + range[2] then return true end
  end
  return false
end

-- A call that took jobs may have run with its reply lost (the connection dropped):
-- those jobs sit in active under a lock nobody renews. Up to `wanted` of them are
-- taken again, each locked with this call's own token (so no later call finds it
-- again), before any new job. Takes push to active's head: the newest
-- LOST_SCAN entries are looked at.
local LOST_SCAN = 10000
local function takeLost(qk, opts, wanted, jobs)
  for _, jobId in ipairs(rcall("LRANGE", qk .. "active", 0, LOST_SCAN - 1)) do
    if #jobs >= wanted then return end
    local jobKey = qk .. jobId
    if lostToken(opts, rcall("GET", jobKey .. ":lock")) then
      local token = tokenAt(opts, #jobs + 1)
      rcall("SET", jobKey .. ":lock", token, "PX", opts["lockDuration"])
      local children = {}
      if opts["children"] then
        children = rcall("HGETALL", jobKey .. ":processed")
      end
      table.insert(jobs, {rcall("HGETALL", jobKey), jobId, token, children})
    end
  end
end

-- Takes up to `wanted` jobs, each locked with its own token (see tokenAt), stopping
-- at the first take that leaves nothing waiting; the jobs of lost replies first
-- (opts.lost: see takeLost). Returns the jobs ({fields, jobId, token, children}
-- each), the rate limit ttl and the next delayed timestamp.
local function takeJobs(qk, timestamp, opts, wanted)
  local jobs = {}
  if opts["lost"] then
    takeLost(qk, opts, wanted, jobs)
  end
  for i = #jobs + 1, wanted do
    opts["token"] = tokenAt(opts, i)
    local result = fetchNextJob(qk, timestamp, opts)
    if result[2] == 0 then
      return jobs, result[3], result[4]
    end
    table.insert(jobs, {result[1], result[2], opts["token"], result[5]})
    if not result[6] and i < wanted then
      return jobs, 0, nothingLeft(qk)
    end
  end
  return jobs, 0, 0
end
