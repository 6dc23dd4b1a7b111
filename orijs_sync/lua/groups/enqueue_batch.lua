--[[
  Add many jobs to a group queue in one call (GroupMQ's autoBatch flush; each job
  as enqueue adds it, see includes/groups/enqueue.lua).

  KEYS[1] ns ("groupmq:{namespace}")
  ARGV[1] keepCompleted  ARGV[2] ordering delay (ms, 0 = none)
  ARGV[3..] per job, seven values: groupId, data (JSON), maxAttempts, orderMs,
            delayUntil (epoch ms, 0 = none), jobId, timestamp (client ms)
  Returns one entry per job: its fields and whether it existed (see gmEnqueue).
]]
local rcall = redis.call
--- @include "groups/enqueue"

local ns, now = KEYS[1], gmRedisNow()
local keepCompleted, orderingDelayMs = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 7 do
  out[#out + 1] = gmEnqueue(ns, now, {
    groupId = ARGV[i], data = ARGV[i + 1], maxAttempts = tonumber(ARGV[i + 2]),
    orderMs = tonumber(ARGV[i + 3]), delayUntil = tonumber(ARGV[i + 4]),
    jobId = ARGV[i + 5], timestamp = tonumber(ARGV[i + 6]),
    keepCompleted = keepCompleted, orderingDelayMs = orderingDelayMs
  })
end
return out
