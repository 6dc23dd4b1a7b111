--[[
  Changes a job's priority; a waiting or prioritized job is re-queued under it,
  as BullMQ's changePriority: with lifo, ahead of the jobs of its priority (the
  next one taken among them), else behind them.
  KEYS[1] job key   ARGV[1] queue key base   ARGV[2] job id   ARGV[3] priority
  ARGV[4] "1" for lifo
  Returns 0 or -1 (missing job).
]]
local rcall = redis.call
--- @include "enqueue"

local qk, jobId, priority, lifo = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4] == "1"
if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
rcall("HSET", KEYS[1], "priority", priority)
local target, pausedOrMaxed = getTargetList(qk .. "meta", qk .. "active", qk .. "wait", qk .. "paused")
if rcall("ZREM", qk .. "prioritized", jobId) > 0 or rcall("LREM", target, -1, jobId) > 0 then
  if priority > 0 and lifo then
    -- a score with no counter part sorts before every job of that priority
    rcall("ZADD", qk .. "prioritized", priority * 0x100000000, jobId)
    addBaseMarker(qk .. "marker", pausedOrMaxed)
  else
    pushReady(qk, jobId, priority, lifo)
  end
end
return 0
