--[[
  Adding one job: standard (wait/paused), prioritized, delayed, or a flow
  parent waiting for its children. A custom id that exists already, or a
  deduplication id still held, adds nothing and gives the existing id.
]]
--- @include "enqueue"

-- Returns {job id, 1 if the job existed already (nothing added) else 0, and for a
-- job added now the id of its "added" event}, or -5 (parent missing), -7 (the id
-- belongs to another parent).
local function addJob(qk, maxEvents, jobId, name, timestamp, data, optsJson, parentKey,
                      parentJson, parentDepsKey, repeatJobKey, waitChildren)
  local eventsKey = qk .. "events"
  local opts = cjson.decode(optsJson)
  if parentKey and rcall("EXISTS", parentKey) ~= 1 then return -5 end
  local counter = rcall("INCR", qk .. "id")
  if jobId == "" then jobId = tostring(counter) end
  local jobKey = qk .. jobId

  if rcall("EXISTS", jobKey) == 1 then
    local existingParent = rcall("HGET", jobKey, "parentKey")
    if parentKey and existingParent and existingParent ~= parentKey
       and rcall("EXISTS", existingParent) == 1 then
      return -7
    end
    rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "duplicated", "jobId", jobId)
    return {jobId, 1}
  end

  local de = opts["de"]
  if de and de["id"] then
    local dedupKey = qk .. "de:" .. de["id"]
    local held = rcall("GET", dedupKey)
    if held then
      rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "deduplicated",
            "jobId", held, "deduplicationId", de["id"], "deduplicatedJobId", jobId)
      return {held, 1}
    end
    if de["ttl"] and tonumber(de["ttl"]) > 0 then
      rcall("SET", dedupKey, jobId, "PX", math.floor(tonumber(de["ttl"])))
    else
      rcall("SET", dedupKey, jobId)
    end
  end

  local delay = tonumber(opts["delay"]) or 0
  local priority = tonumber(opts["priority"]) or 0
  local fields = {"name", name, "data", data, "opts", optsJson,
                  "timestamp", timestamp, "delay", delay, "priority", priority}
  if parentKey then
    table.insert(fields, "parentKey"); table.insert(fields, parentKey)
    table.insert(fields, "parent"); table.insert(fields, parentJson)
  end
  if repeatJobKey then
    table.insert(fields, "rjk"); table.insert(fields, repeatJobKey)
  end
  if de and de["id"] then
    table.insert(fields, "deid"); table.insert(fields, de["id"])
  end
  rcall("HSET", jobKey, unpack(fields))
  local added = rcall("XADD", eventsKey, "*", "event", "added", "jobId", jobId, "name", name)

  if waitChildren then
    rcall("ZADD", qk .. "waiting-children", timestamp, jobId)
    rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "waiting-children", "jobId", jobId)
  elseif delay > 0 then
    addToDelayed(qk .. "marker", qk .. "delayed", eventsKey, maxEvents, jobId, timestamp, delay)
  else
    enqueueReadyJob(qk, jobId, priority, opts["lifo"], nil)
  end
  if parentDepsKey then
    rcall("SADD", parentDepsKey, jobKey)
  end
  return {jobId, 0, added}
end
