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

local jobKey, qk, jobId = KEYS[1], ARGV[1], ARGV[2]
if rcall("EXISTS", jobKey) ~= 1 then return -1 end
local code = releaseLock(jobKey, KEYS[4], jobId, ARGV[4])
if code < 0 then return code end
if rcall("LREM", KEYS[2], -1, jobId) < 1 then return -3 end
local fields = cjson.decode(ARGV[5])
if #fields > 0 then rcall("HSET", jobKey, unpack(fields)) end
promoteDelayedJobs(qk, ARGV[3])
rcall("HINCRBY", jobKey, "atm", 1)
local attrs = rcall("HMGET", jobKey, "priority", "opts")
local lifo = cjson.decode(attrs[2])["lifo"]
enqueueReadyJob(qk, jobId, tonumber(attrs[1]) or 0, lifo, "active")
return 0
