--[[
  Adds one job: standard (wait/paused), prioritized, delayed, or a flow
  parent waiting for its children. A custom id that exists already, or a
  deduplication id still held, adds nothing and returns the existing id.

  KEYS[1] meta           KEYS[2] id counter     KEYS[3] events
  ARGV[1] queue key base ("bull:name:")
  ARGV[2] JSON {jobId, name, timestamp, parentKey, parent, parentDepsKey, rjk, waitChildren}
  ARGV[3] job data (JSON text, stored as is)
  ARGV[4] job opts (JSON text in BullMQ's encoding, stored as is)
  Returns the job id, or -5 when the parent key is missing, -7 when the
  existing job with that id belongs to another parent.
]]
local rcall = redis.call
--- @include "enqueue"

local qk = ARGV[1]
local args = cjson.decode(ARGV[2])
local opts = cjson.decode(ARGV[4])
local eventsKey = KEYS[3]
local timestamp = args["timestamp"]
local parentKey = args["parentKey"]
if parentKey == cjson.null then parentKey = nil end
local parentDepsKey = args["parentDepsKey"]
if parentDepsKey == cjson.null then parentDepsKey = nil end

if parentKey and rcall("EXISTS", parentKey) ~= 1 then
  return -5
end

local counter = rcall("INCR", KEYS[2])
local maxEvents = getOrSetMaxEvents(KEYS[1])
local jobId = args["jobId"]
if jobId == nil or jobId == cjson.null or jobId == "" then
  jobId = tostring(counter)
end
local jobKey = qk .. jobId

if rcall("EXISTS", jobKey) == 1 then
  local existingParent = rcall("HGET", jobKey, "parentKey")
  if parentKey and existingParent and existingParent ~= parentKey
     and rcall("EXISTS", existingParent) == 1 then
    return -7
  end
  rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "duplicated", "jobId", jobId)
  return jobId
end

local de = opts["de"]
if de and de["id"] then
  local dedupKey = qk .. "de:" .. de["id"]
  local held = rcall("GET", dedupKey)
  if held then
    rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "deduplicated",
          "jobId", held, "deduplicationId", de["id"], "deduplicatedJobId", jobId)
    return held
  end
  if de["ttl"] and tonumber(de["ttl"]) > 0 then
    rcall("SET", dedupKey, jobId, "PX", math.floor(tonumber(de["ttl"])))
  else
    rcall("SET", dedupKey, jobId)
  end
end

local delay = tonumber(opts["delay"]) or 0
local priority = tonumber(opts["priority"]) or 0
local fields = {"name", args["name"], "data", ARGV[3], "opts", ARGV[4],
                "timestamp", timestamp, "delay", delay, "priority", priority}
if parentKey then
  table.insert(fields, "parentKey"); table.insert(fields, parentKey)
  table.insert(fields, "parent"); table.insert(fields, cjson.encode(args["parent"]))
end
if args["rjk"] and args["rjk"] ~= cjson.null then
  table.insert(fields, "rjk"); table.insert(fields, args["rjk"])
end
if de and de["id"] then
  table.insert(fields, "deid"); table.insert(fields, de["id"])
end
rcall("HSET", jobKey, unpack(fields))
rcall("XADD", eventsKey, "*", "event", "added", "jobId", jobId, "name", args["name"])

if args["waitChildren"] then
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
return jobId
