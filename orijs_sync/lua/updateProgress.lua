--[[
  Sets a job's progress and emits "progress".
  KEYS[1] job key   KEYS[2] events   KEYS[3] meta
  ARGV[1] job id    ARGV[2] progress (JSON text)
  Returns 0 or -1 (missing job).
]]
local rcall = redis.call
--- @include "queue_state"

if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
rcall("HSET", KEYS[1], "progress", ARGV[2])
rcall("XADD", KEYS[2], "MAXLEN", "~", getOrSetMaxEvents(KEYS[3]), "*", "event", "progress",
      "jobId", ARGV[1], "data", ARGV[2])
return 0
