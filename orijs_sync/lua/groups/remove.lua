--[[
  Remove a job whatever its state. An active job's group is released (its
  worker's finish is then refused).

  KEYS[1] ns
  ARGV[1] job id
  Returns 1 when removed, 0 when there was no such job.
]]
local rcall = redis.call
--- @include "groups/remove"

return gmRemoveJob(KEYS[1], ARGV[1]) and 1 or 0
