--[[
  Writing a new job's hash and putting it where it belongs: waiting-children,
  delayed, prioritized or wait/paused (with the "added" event and the event of
  that state), as BullMQ's add scripts do.
]]
--- @include "enqueue"

-- job: {id, name, timestamp, data, optsJson (stored as is), opts (decoded), and
-- optional parentKey, parentJson, parentDepsKey, repeatJobKey, waitChildren}.
-- Returns the id of the "added" event.
local function storeNewJob(qk, maxEvents, job)
  local opts = job.opts
  local delay = tonumber(opts["delay"]) or 0
  local priority = tonumber(opts["priority"]) or 0
  local fields = {"name", job.name, "data", job.data, "opts", job.optsJson,
                  "timestamp", job.timestamp, "delay", delay, "priority", priority}
  if job.parentKey then
    table.insert(fields, "parentKey"); table.insert(fields, job.parentKey)
    table.insert(fields, "parent"); table.insert(fields, job.parentJson)
  end
  if job.repeatJobKey then
    table.insert(fields, "rjk"); table.insert(fields, job.repeatJobKey)
  end
  local de = opts["de"]
  if type(de) == "table" and de["id"] then
    table.insert(fields, "deid"); table.insert(fields, de["id"])
  end
  local jobKey = qk .. job.id
  local eventsKey = qk .. "events"
  rcall("HSET", jobKey, unpack(fields))
  local added = rcall("XADD", eventsKey, "*", "event", "added", "jobId", job.id, "name", job.name)

  if job.waitChildren then
    rcall("ZADD", qk .. "waiting-children", job.timestamp, job.id)
    rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "waiting-children",
          "jobId", job.id)
  elseif delay > 0 then
    addToDelayed(qk .. "marker", qk .. "delayed", eventsKey, maxEvents, job.id, job.timestamp, delay)
  else
    enqueueReadyJob(qk, job.id, priority, opts["lifo"], nil)
  end
  if job.parentDepsKey then
    rcall("SADD", job.parentDepsKey, jobKey)
  end
  return added
end
