--[[
  Retries a finished job (job.retry()): completed or failed -> wait, with
  its result cleared and its parent waiting for it again.
  KEYS[1] job key   ARGV[1] queue key base   ARGV[2] job id
  ARGV[3] "completed" | "failed"   ARGV[4] "1" to reset attemptsMade   ARGV[5] "1" to reset attemptsStarted
  Returns 0, -1 (missing job) or -3 (not in that state).
]]
local rcall = redis.call
--- @include "reprocess"

return reprocessFinished(ARGV[1], ARGV[2], ARGV[3], ARGV[4] == "1", ARGV[5] == "1")
