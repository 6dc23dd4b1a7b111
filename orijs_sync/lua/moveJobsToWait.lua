--[[
  Moves up to ARGV[3] jobs of one state back to wait (BullMQ's retryJobs and
  promoteJobs, one batch a call): failed or completed jobs that finished at or
  before ARGV[4] as job.retry() moves them, or delayed jobs as job.promote() does
  (each to wait or prioritized, by its priority, with its "waiting" event).
  An id in the set whose job hash is gone is dropped from it.
  KEYS[1] the state's set (failed, completed or delayed)
  ARGV[1] queue key base   ARGV[2] "failed" | "completed" | "delayed"
  ARGV[3] how many at most   ARGV[4] highest score taken (finishedOn ms; "+inf")
  Returns {ids read from the set (fewer than ARGV[3]: none left), jobs moved}.
]]
local rcall = redis.call
--- @include "reprocess"
--- @include "promote_job"

local qk, state = ARGV[1], ARGV[2]
local ids = rcall("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[4], "LIMIT", 0, tonumber(ARGV[3]))
local moved = 0
for _, jobId in ipairs(ids) do
  if rcall("EXISTS", qk .. jobId) ~= 1 then
    rcall("ZREM", KEYS[1], jobId)
  else
    if state == "delayed" then
      promoteJob(qk, jobId)
    else
      reprocessFinished(qk, jobId, state, false, false)
    end
    moved = moved + 1
  end
end
return {#ids, moved}
