--[[
  Extends the locks of many active jobs in one call.

  KEYS[1] stalled set
  ARGV[1] queue key base   ARGV[2] JSON [jobId, ...]   ARGV[3] JSON [token, ...]
  ARGV[4] lock duration (ms)
  Returns the ids whose lock is gone or held by another token.
]]
local rcall = redis.call
local qk = ARGV[1]
local ids = cjson.decode(ARGV[2])
local tokens = cjson.decode(ARGV[3])
local lost = {}
for i, jobId in ipairs(ids) do
  local lockKey = qk .. jobId .. ":lock"
  if rcall("GET", lockKey) == tokens[i] then
    rcall("SET", lockKey, tokens[i], "PX", ARGV[4])
    rcall("SREM", KEYS[1], jobId)
  else
    table.insert(lost, jobId)
  end
end
return lost
