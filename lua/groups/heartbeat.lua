--[[
  Extend the deadlines of a worker's active jobs (GroupMQ's heartbeat: the
  processing deadline is what holds the group; its active list stays as is).

  KEYS[1] ns
  ARGV[1] now (ms)  ARGV[2] extension (ms)  ARGV[3] token  ARGV[4..] job ids
  Returns the ids that are no longer this worker's (recovered, removed, finished).
]]
local rcall = redis.call
local ns, now, extend, token = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local lost = {}
for i = 4, #ARGV do
  local jobId = ARGV[i]
  local procKey = ns .. ":processing:" .. jobId
  if rcall("HGET", procKey, "token") == token then
    rcall("HSET", procKey, "deadlineAt", tostring(now + extend))
    rcall("ZADD", ns .. ":processing", now + extend, jobId)
  else
    lost[#lost + 1] = jobId
  end
end
return lost
