--[[
  Gives a delayed job a new delay counted from now.
  KEYS[1] job key   KEYS[2] delayed   KEYS[3] events   KEYS[4] meta   KEYS[5] marker
  ARGV[1] job id    ARGV[2] new delay (ms)   ARGV[3] now (ms)
  Returns 0, -1 (missing job) or -3 (not delayed).
]]
local rcall = redis.call
--- @include "queue_state"

if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
if rcall("ZREM", KEYS[2], ARGV[1]) ~= 1 then return -3 end
local delay = tonumber(ARGV[2])
local score, runAt = getDelayedScore(KEYS[2], ARGV[3], delay)
rcall("HSET", KEYS[1], "delay", delay)
rcall("ZADD", KEYS[2], score, ARGV[1])
rcall("XADD", KEYS[3], "MAXLEN", "~", getOrSetMaxEvents(KEYS[4]), "*", "event", "delayed",
      "jobId", ARGV[1], "delay", runAt)
addDelayMarker(KEYS[5], KEYS[2])
return 0
