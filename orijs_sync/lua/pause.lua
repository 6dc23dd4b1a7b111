--[[
  Pauses or resumes a queue (for every worker, Node's included): jobs move
  between wait and paused, meta.paused is set or cleared, workers are woken.

  KEYS[1] source list (wait to pause, paused to resume)   KEYS[2] destination list
  KEYS[3] meta   KEYS[4] prioritized   KEYS[5] events   KEYS[6] delayed   KEYS[7] marker
  ARGV[1] "paused" | "resumed"
]]
local rcall = redis.call
--- @include "queue_state"

local hasJobs = rcall("EXISTS", KEYS[1]) == 1
if hasJobs then rcall("RENAME", KEYS[1], KEYS[2]) end
if ARGV[1] == "paused" then
  rcall("HSET", KEYS[3], "paused", 1)
  rcall("DEL", KEYS[7])
else
  rcall("HDEL", KEYS[3], "paused")
  if hasJobs or rcall("ZCARD", KEYS[4]) > 0 then
    rcall("ZADD", KEYS[7], 0, "0")
  else
    addDelayMarker(KEYS[7], KEYS[6])
  end
end
rcall("XADD", KEYS[5], "*", "event", ARGV[1])
return 0
