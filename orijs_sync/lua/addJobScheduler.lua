--[[
  Creates or replaces a job scheduler and schedules its next run. A run not
  yet taken by a worker is replaced; a run already taken stays, and the
  scheduler continues after it.

  KEYS[1] repeat zset   KEYS[2] meta   KEYS[3] id counter   KEYS[4] events
  ARGV[1] queue key base ("bull:name:")
  ARGV[2] scheduler id
  ARGV[3] JSON {name, pattern?, every?, tz?, limit?, startDate?, endDate?} (ms)
  ARGV[4] next run (ms) of a cron pattern; ignored for "every"
  ARGV[5] template data (JSON text)
  ARGV[6] template opts (JSON text, BullMQ's encoding)
  ARGV[7] opts of the run's job (JSON: template opts and "repeat")
  ARGV[8] now (ms)
  Returns {jobId, delay}; -10 when the cron run's job id belongs to an
  earlier series, -11 when no free "every" slot was found.
]]
local rcall = redis.call
--- @include "scheduler"

local repeatKey, qk, schedulerId = KEYS[1], ARGV[1], ARGV[2]
local schedulerKey = repeatKey .. ":" .. schedulerId
local fields = cjson.decode(ARGV[3])
local jobOpts = cjson.decode(ARGV[7])
local now = tonumber(ARGV[8])
local maxEvents = getOrSetMaxEvents(KEYS[2])
local prevMillis = rcall("ZSCORE", repeatKey, schedulerId)
prevMillis = prevMillis and tonumber(prevMillis) or nil

local every = tonumber(fields["every"])
local nextMillis = tonumber(ARGV[4])
local sameEvery = false
if every then
  local fromMillis, offset = nil, 0
  if prevMillis and tonumber(rcall("HGET", schedulerKey, "every")) == every then
    sameEvery = true
    fromMillis = prevMillis
    offset = rcall("HGET", schedulerKey, "offset") or 0
  end
  nextMillis, fields["offset"] = everyNextMillis(fromMillis, every, now, offset, fields["startDate"])
end

if prevMillis and removePendingRun(qk, schedulerJobId(schedulerId, prevMillis))
   and sameEvery then
  -- The pending run was replaced: keep its slot.
  nextMillis = prevMillis
end

local jobId = schedulerJobId(schedulerId, nextMillis)
if rcall("EXISTS", qk .. jobId) == 1 then
  if every then
    local scans = 0
    repeat
      nextMillis = nextMillis + every
      jobId = schedulerJobId(schedulerId, nextMillis)
      scans = scans + 1
    until rcall("EXISTS", qk .. jobId) == 0 or scans >= 32
    if rcall("EXISTS", qk .. jobId) == 1 then return -11 end
  elseif prevMillis == nextMillis then
    -- A worker already took this run (and schedules the next): only the
    -- scheduler's settings change.
    storeScheduler(repeatKey, schedulerId, nextMillis, fields, ARGV[5], ARGV[6])
    return {jobId, 0}
  else
    return -10
  end
end

if every then
  jobOpts["repeat"]["offset"] = fields["offset"]
end
storeScheduler(repeatKey, schedulerId, nextMillis, fields, ARGV[5], ARGV[6])
rcall("INCR", KEYS[3])
local delay = addRunJob(qk, jobId, fields["name"], ARGV[5], jobOpts, now, schedulerId,
                        nextMillis, maxEvents)
return {jobId, delay}
