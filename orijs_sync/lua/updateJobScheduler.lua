--[[
  Schedules the run after the current one of a job scheduler; a worker calls
  it when it takes a run's job. Only the scheduler's current run may do so,
  once, so every worker and producer together make one series.

  KEYS[1] repeat zset   KEYS[2] meta   KEYS[3] id counter   KEYS[4] events
  ARGV[1] queue key base ("bull:name:")
  ARGV[2] scheduler id
  ARGV[3] id of the job that was taken (the producer)
  ARGV[4] next run (ms) of a cron pattern; "" for "every"
  ARGV[5] opts of the next run's job (JSON, with "repeat")
  ARGV[6] now (ms)
  Returns the new job's id, or false when nothing was added (the scheduler is
  gone, the producer is not its current run, or the next run exists).
]]
local rcall = redis.call
--- @include "scheduler"

local repeatKey, qk, schedulerId = KEYS[1], ARGV[1], ARGV[2]
local schedulerKey = repeatKey .. ":" .. schedulerId
local prevMillis = rcall("ZSCORE", repeatKey, schedulerId)
if not prevMillis then return false end
prevMillis = tonumber(prevMillis)
if ARGV[3] ~= schedulerJobId(schedulerId, prevMillis) then return false end

local now = tonumber(ARGV[6])
local jobOpts = cjson.decode(ARGV[5])
local repeatOpts = jobOpts["repeat"]
if type(repeatOpts) ~= "table" then
  repeatOpts = {}
  jobOpts["repeat"] = repeatOpts
end
local attrs = rcall("HMGET", schedulerKey, "name", "data", "every", "startDate", "offset")
local every = finiteNumber(attrs[3]) or finiteNumber(repeatOpts["every"])
if every and every <= 0 then every = nil end
local nextMillis = tonumber(ARGV[4])
if every then
  local offset
  nextMillis, offset = everyNextMillis(prevMillis, every, now,
                                       attrs[5] or tonumber(repeatOpts["offset"]) or 0, attrs[4])
  if not attrs[5] then rcall("HSET", schedulerKey, "offset", offset) end
  repeatOpts["offset"] = offset
end
if not nextMillis then return false end

local jobId = schedulerJobId(schedulerId, nextMillis)
local maxEvents = getOrSetMaxEvents(KEYS[2])
if rcall("EXISTS", qk .. jobId) == 1 then
  rcall("XADD", KEYS[4], "MAXLEN", "~", maxEvents, "*", "event", "duplicated", "jobId", jobId)
  return false
end
rcall("ZADD", repeatKey, nextMillis, schedulerId)
raiseCounter(schedulerKey, "ic")
rcall("INCR", KEYS[3])
local name = attrs[1] or schedulerId
addRunJob(qk, jobId, name, attrs[2] or "{}", jobOpts, now, schedulerId, nextMillis, maxEvents)
rcall("HSET", qk .. ARGV[3], "nrjid", jobId)
return jobId
