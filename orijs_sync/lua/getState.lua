--[[
  The state of one job, as BullMQ names it (see includes/job_state).
  KEYS[1] queue key base ("bull:name:")
  ARGV[1] job id
  Returns completed, failed, delayed, active, waiting (wait or paused list),
  prioritized, waiting-children or unknown.
]]
local rcall = redis.call
--- @include "job_state"

return jobState(KEYS[1], ARGV[1])
