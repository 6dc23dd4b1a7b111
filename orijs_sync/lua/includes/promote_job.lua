--[[
  A delayed job to wait (or prioritized) now, as job.promote() and the queue's
  promoteJobs move it.
]]
--- @include "enqueue"

-- Returns 0, or -3 when the job is not delayed.
local function promoteJob(qk, jobId)
  if rcall("ZREM", qk .. "delayed", jobId) ~= 1 then return -3 end
  rcall("HSET", qk .. jobId, "delay", 0)
  enqueueReadyJob(qk, jobId, storedPriority(rcall("HGET", qk .. jobId, "priority")), false, "delayed")
  return 0
end
