--[[
  Extend the deadlines of a worker's active jobs (GroupMQ's heartbeat: the
  processing deadline is what holds the group; its active list stays as is).

  KEYS[1] ns
  ARGV[1] now (ms)  ARGV[2] extension (ms)  ARGV[3..] pairs: job id, the token of
  the run holding it (its reservation's)
  Returns the ids that are no longer held by that run (recovered, removed, finished,
  or reserved again by a later run).
]]
local rcall = redis.call
local ns, now, extend = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV, 2 do
  local jobId = ARGV[i]
  local procKey = ns .. ":processing:" .. jobId
  if rcall("HGET", procKey, "token") == ARGV[i + 1] then
    rcall("HSET", procKey, "deadlineAt", tostring(now + extend))
    rcall("ZADD", ns .. ":processing", now + extend, jobId)
  else
    lost[#lost + 1] = jobId
  end
end
return lost
