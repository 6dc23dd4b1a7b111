--[[
  Register a repeating job as GroupMQ 1.1 stores it: the definition (JSON) under
  repeat:{repeatKey}, its next run in repeat:schedule, a lookup from
  (group, repeat options) to repeatKey, and a placeholder job hash
  job:repeat:{repeatKey} standing for the series.

  KEYS[1] ns
  ARGV[1] repeatKey  ARGV[2] definition (JSON)  ARGV[3] next run (ms)
  ARGV[4] lookup suffix ("{groupId}:{repeat JSON}")  ARGV[5] groupId  ARGV[6] data (JSON)
  ARGV[7] maxAttempts  ARGV[8] timestamp (ms)  ARGV[9] orderMs
  Returns the placeholder's id.
]]
local rcall = redis.call
local ns, repeatKey = KEYS[1], ARGV[1]
local jobId = "repeat:" .. repeatKey
rcall("SET", ns .. ":repeat:" .. repeatKey, ARGV[2])
rcall("ZADD", ns .. ":repeat:schedule", ARGV[3], repeatKey)
rcall("SET", ns .. ":repeat:lookup:" .. ARGV[4], repeatKey)
rcall("HSET", ns .. ":job:" .. jobId, "id", jobId, "groupId", ARGV[5], "data", ARGV[6],
      "attempts", "0", "maxAttempts", ARGV[7], "seq", "0", "timestamp", ARGV[8],
      "orderMs", ARGV[9], "status", "waiting")
return jobId
