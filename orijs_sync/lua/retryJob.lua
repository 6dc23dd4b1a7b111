--[[
  A failed attempt with attempts left and no backoff delay: active -> wait
  (or prioritized), attemptsMade + 1, lock released.

  KEYS[1] job key   KEYS[2] active   KEYS[3] events   KEYS[4] stalled
  ARGV[1] queue key base   ARGV[2] job id   ARGV[3] timestamp
  ARGV[4] token            ARGV[5] JSON list of job fields to set [field, value, ...]
  Returns 0 or -1 (missing job), -2/-6 (lock), -3 (not active).
]]
local rcall = redis.call
--- @include "enqueue"
--- @include "lock"
--- @include "stored"

local jobKey, qk, jobId = KEYS[1], ARGV[1], ARGV[2]
local code = takeFromActive(jobKey, KEYS[2], KEYS[4], jobId, ARGV[4], ARGV[5])
if code < 0 then return code end
promoteDelayedJobs(qk, ARGV[3])
raiseCounter(jobKey, "atm")
local attrs = rcall("HMGET", jobKey, "priority", "opts")
local lifo = cjson.decode(attrs[2])["lifo"]
enqueueReadyJob(qk, jobId, storedPriority(attrs[1]), lifo, "active")
return 0
