--[[
  Moves a delayed job to wait (or prioritized) now.
  KEYS[1] job key   ARGV[1] queue key base   ARGV[2] job id
  Returns 0, or -3 when the job is not delayed.
]]
local rcall = redis.call
--- @include "enqueue"

local qk, jobId = ARGV[1], ARGV[2]
if rcall("ZREM", qk .. "delayed", jobId) ~= 1 then return -3 end
rcall("HSET", KEYS[1], "delay", 0)
local attrs = rcall("HMGET", KEYS[1], "priority", "opts")
enqueueReadyJob(qk, jobId, tonumber(attrs[1]) or 0, false, "delayed")
return 0
