--[[
  Job schedulers: the "repeat" zset (scheduler id -> next run in ms), one
  hash "repeat:<id>" per scheduler, and the job of each run, whose id is
  "repeat:<id>:<run ms>" so that two writers of the same run collide on one key.
]]
--- @include "remove_job"
--- @include "stored"

-- The run after prevMillis of an "every" scheduler (the first run when
-- prevMillis is nil), and its offset inside the period. Missed runs are
-- skipped: a run never lands in the past.
local function everyNextMillis(prevMillis, every, now, offset, startDate)
  offset = finiteNumber(offset) or 0
  startDate = finiteNumber(startDate)
  local nextMillis
  if prevMillis == nil then
    if startDate then
      nextMillis = math.max(startDate, now)
    elseif offset > 0 then
      nextMillis = math.floor(now / every) * every + offset
      if nextMillis <= now then nextMillis = nextMillis + every end
    else
      nextMillis = now
    end
  else
    nextMillis = prevMillis + every
    if nextMillis < now then
      nextMillis = math.floor(now / every) * every + offset
      if nextMillis <= now then nextMillis = nextMillis + every end
    end
  end
  if offset == 0 then
    offset = nextMillis - math.floor(nextMillis / every) * every
  end
  return math.floor(nextMillis), math.floor(offset)
end

local function schedulerJobId(schedulerId, millis)
  return "repeat:" .. schedulerId .. ":" .. millis
end

-- Removes a run that no worker has taken yet (delayed, prioritized, wait or
-- paused). Returns the state it was removed from, or nil.
local function removePendingRun(qk, jobId)
  local state
  if rcall("ZREM", qk .. "delayed", jobId) == 1 then
    state = "delayed"
  elseif rcall("ZREM", qk .. "prioritized", jobId) == 1 then
    state = "prioritized"
  elseif rcall("LREM", qk .. "wait", 1, jobId) > 0 or rcall("LREM", qk .. "paused", 1, jobId) > 0 then
    state = "waiting"
  end
  if state then
    removeJob(qk, jobId, true)
  end
  return state
end

-- Writes the scheduler's hash from scratch (keeping its iteration count)
-- and its next run in the zset.
local function storeScheduler(repeatKey, schedulerId, nextMillis, fields, templateData, templateOpts)
  local schedulerKey = repeatKey .. ":" .. schedulerId
  local values = {"name", fields["name"]}
  for _, name in ipairs({"tz", "limit", "pattern", "startDate", "endDate", "every", "offset"}) do
    local value = fields[name]
    if value ~= nil and value ~= cjson.null then
      table.insert(values, name); table.insert(values, value)
    end
  end
  if templateOpts ~= "" and templateOpts ~= "{}" then
    table.insert(values, "opts"); table.insert(values, templateOpts)
  end
  if templateData ~= "" and templateData ~= "{}" then
    table.insert(values, "data"); table.insert(values, templateData)
  end
  table.insert(values, "ic"); table.insert(values, rcall("HGET", schedulerKey, "ic") or 1)
  rcall("ZADD", repeatKey, nextMillis, schedulerId)
  rcall("DEL", schedulerKey)
  rcall("HSET", schedulerKey, unpack(values))
end

-- Stores the job of one run and puts it where workers find it (delayed
-- until its run time, else wait or prioritized).
local function addRunJob(qk, jobId, name, data, opts, now, schedulerId, nextMillis, maxEvents)
  local delay = math.max(nextMillis - now, 0)
  opts["jobId"] = jobId
  opts["delay"] = delay
  opts["timestamp"] = now
  opts["prevMillis"] = nextMillis
  opts["repeatJobKey"] = schedulerId
  local priority = tonumber(opts["priority"]) or 0
  rcall("HSET", qk .. jobId, "name", name, "data", data, "opts", cjson.encode(opts),
        "timestamp", now, "delay", delay, "priority", priority, "rjk", schedulerId)
  rcall("XADD", qk .. "events", "*", "event", "added", "jobId", jobId, "name", name)
  if delay > 0 then
    addToDelayed(qk .. "marker", qk .. "delayed", qk .. "events", maxEvents, jobId, now, delay)
  else
    enqueueReadyJob(qk, jobId, priority, opts["lifo"] == true, nil)
  end
  return delay
end
