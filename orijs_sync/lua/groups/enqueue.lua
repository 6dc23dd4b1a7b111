--[[
  Add one job to a group queue (see includes/groups/enqueue.lua).

  KEYS[1] ns ("groupmq:{namespace}")
  ARGV[1] groupId  ARGV[2] data (JSON)  ARGV[3] maxAttempts  ARGV[4] orderMs
  ARGV[5] delayUntil (epoch ms, 0 = none)  ARGV[6] jobId  ARGV[7] keepCompleted
  ARGV[8] timestamp (client ms)  ARGV[9] ordering delay (ms, 0 = none)
  Returns the job's fields and whether it existed (see gmEnqueue).
]]
local rcall = redis.call
--- @include "groups/enqueue"

return gmEnqueue(KEYS[1], gmRedisNow(), {
  groupId = ARGV[1], data = ARGV[2], maxAttempts = tonumber(ARGV[3]),
  orderMs = tonumber(ARGV[4]), delayUntil = tonumber(ARGV[5]), jobId = ARGV[6],
  keepCompleted = tonumber(ARGV[7]), timestamp = tonumber(ARGV[8]),
  orderingDelayMs = tonumber(ARGV[9])
})
