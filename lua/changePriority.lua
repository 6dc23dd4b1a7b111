--[[
  Changes a job's priority; a waiting or prioritized job is re-queued under it.
  KEYS[1] job key   ARGV[1] queue key base   ARGV[2] job id   ARGV[3] priority
  Returns 0 or -1 (missing job).
]]
local rcall = redis.call
--- @include "enqueue"

local qk, jobId, priority = ARGV[1], ARGV[2], tonumber(ARGV[3])
if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
rcall("HSET", KEYS[1], "priority", priority)
local target = getTargetList(qk .. "meta", qk .. "active", qk .. "wait", qk .. "paused")
if rcall("ZREM", qk .. "prioritized", jobId) > 0 or rcall("LREM", target, -1, jobId) > 0 then
  pushReady(qk, jobId, priority, cjson.decode(rcall("HGET", KEYS[1], "opts") or "{}")["lifo"])
end
return 0
