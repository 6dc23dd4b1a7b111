--[[
  Moves a delayed job to wait (or prioritized) now.
  KEYS[1] job key   ARGV[1] queue key base   ARGV[2] job id
  Returns 0, or -3 when the job is not delayed.
]]
local rcall = redis.call
--- @include "promote_job"

return promoteJob(ARGV[1], ARGV[2])
