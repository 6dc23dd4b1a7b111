--[[
  Replace a job's data.

  KEYS[1] ns
  ARGV[1] job id  ARGV[2] data (JSON)
  Returns 1, or 0 when there is no such job.
]]
local jobKey = KEYS[1] .. ":job:" .. ARGV[1]
if redis.call("EXISTS", jobKey) == 0 then return 0 end
redis.call("HSET", jobKey, "data", ARGV[2])
return 1
