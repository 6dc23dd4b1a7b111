--[[
  A handler waits for children it added: active -> waiting-children when the
  job still has pending children (or the given child is still pending).

  KEYS[1] job key   KEYS[2] active   KEYS[3] waiting-children   KEYS[4] stalled
  KEYS[5] events
  ARGV[1] job id   ARGV[2] token   ARGV[3] child key ("" for any child)
  ARGV[4] timestamp (ms)
  Returns 0 (moved), 1 (nothing pending: the job stays active), -1 missing
  job, -2/-6 lock, -3 not active, -9 a child failed with fail-parent.
]]
local rcall = redis.call
--- @include "lock"

local jobKey, jobId = KEYS[1], ARGV[1]
if rcall("EXISTS", jobKey) ~= 1 then return -1 end
if rcall("ZCARD", jobKey .. ":unsuccessful") ~= 0 then return -9 end
local pending
if ARGV[3] ~= "" then
  pending = rcall("SISMEMBER", jobKey .. ":dependencies", ARGV[3]) == 1
else
  pending = rcall("SCARD", jobKey .. ":dependencies") > 0
end
if not pending then return 1 end
local code = takeFromActive(jobKey, KEYS[2], KEYS[4], jobId, ARGV[2], "[]")
if code < 0 then return code end
rcall("ZADD", KEYS[3], tonumber(ARGV[4]), jobId)
rcall("XADD", KEYS[5], "*", "event", "waiting-children", "jobId", jobId, "prev", "active")
return 0
