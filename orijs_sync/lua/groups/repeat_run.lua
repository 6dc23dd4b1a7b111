--[[
  One run of a repeating job, exactly once per period whatever the number of
  schedulers: the run happens only if the definition is still the one the
  caller read and still due, and the same call moves it to its next run.

  KEYS[1] ns
  ARGV[1] repeatKey  ARGV[2] the definition as read (JSON)  ARGV[3] its new text
  ARGV[4] next run (ms)  ARGV[5] now (ms)  ARGV[6] new job id  ARGV[7] keepCompleted
  ARGV[8] groupId  ARGV[9] data (JSON)  ARGV[10] maxAttempts  ARGV[11] orderMs
  Returns 1 when this call ran it, 0 when another scheduler did or it is gone.
]]
local rcall = redis.call
--- @include "groups/enqueue"

local ns, repeatKey, now = KEYS[1], ARGV[1], tonumber(ARGV[5])
local defKey = ns .. ":repeat:" .. repeatKey
local due = rcall("ZSCORE", ns .. ":repeat:schedule", repeatKey)
if not due or tonumber(due) > now or rcall("GET", defKey) ~= ARGV[2] then
  return 0
end
rcall("SET", defKey, ARGV[3])
rcall("ZADD", ns .. ":repeat:schedule", ARGV[4], repeatKey)
gmEnqueue(ns, gmRedisNow(), {
  groupId = ARGV[8], data = ARGV[9], maxAttempts = tonumber(ARGV[10]),
  orderMs = tonumber(ARGV[11]), delayUntil = 0, jobId = ARGV[6],
  keepCompleted = tonumber(ARGV[7]), timestamp = now, orderingDelayMs = 0
})
return 1
