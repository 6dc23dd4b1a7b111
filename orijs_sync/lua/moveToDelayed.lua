--[[
  Active -> delayed until a timestamp: a retry with backoff (counts an
  attempt) or job.move_to_delayed() from a handler (ARGV[6] = "1", does not).

  KEYS[1] job key   KEYS[2] active   KEYS[3] events   KEYS[4] stalled   KEYS[5] meta
  ARGV[1] queue key base   ARGV[2] job id   ARGV[3] now (ms)   ARGV[4] token
  ARGV[5] run-at timestamp (ms)   ARGV[6] "1" to skip counting an attempt
  ARGV[7] JSON list of job fields to set
  Returns 0 or -1/-2/-3/-6 as retryJob.
]]
local rcall = redis.call
--- @include "enqueue"
--- @include "lock"
--- @include "stored"

local jobKey, qk, jobId = KEYS[1], ARGV[1], ARGV[2]
local code = takeFromActive(jobKey, KEYS[2], KEYS[4], jobId, ARGV[4], ARGV[7])
if code < 0 then return code end
if ARGV[6] ~= "1" then raiseCounter(jobKey, "atm") end
local runAt = tonumber(ARGV[5])
local delay = math.max(runAt - tonumber(ARGV[3]), 0)
rcall("HSET", jobKey, "delay", delay)
addToDelayed(qk .. "marker", qk .. "delayed", KEYS[3], getOrSetMaxEvents(KEYS[5]), jobId, ARGV[3], delay)
return 0
