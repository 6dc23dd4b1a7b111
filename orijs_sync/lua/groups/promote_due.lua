--[[
  The scheduler's step: move delayed jobs whose time came to waiting, and
  staged jobs (ordering method "scheduler") whose ordering window closed into
  their groups; each group whose head can now run goes to ready.

  KEYS[1] ns
  ARGV[1] now (ms)  ARGV[2] most jobs of each kind
  Returns {delayed jobs promoted, staged jobs promoted, ms until the next staged job or -1}.
]]
local rcall = redis.call
--- @include "groups/core"

local ns, now, limit = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local delayed, staged = 0, 0
for _, jobId in ipairs(rcall("ZRANGEBYSCORE", ns .. ":delayed", 0, now, "LIMIT", 0, limit)) do
  rcall("ZREM", ns .. ":delayed", jobId)
  local jobKey = ns .. ":job:" .. jobId
  local gid = rcall("HGET", jobKey, "groupId")
  if gid then
    if rcall("HGET", jobKey, "status") == "delayed" then
      rcall("HSET", jobKey, "status", "waiting")
      rcall("HDEL", jobKey, "runAt")
    end
    if rcall("LLEN", ns .. ":g:" .. gid .. ":active") == 0 then gmReadyHead(ns, gid) end
    delayed = delayed + 1
  end
end
for _, jobId in ipairs(rcall("ZRANGEBYSCORE", ns .. ":stage", 0, now, "LIMIT", 0, limit)) do
  rcall("ZREM", ns .. ":stage", jobId)
  local jobKey = ns .. ":job:" .. jobId
  local f = rcall("HMGET", jobKey, "groupId", "score", "status")
  if f[1] and f[3] == "staged" then
    rcall("ZADD", ns .. ":g:" .. f[1], f[2], jobId)
    rcall("HSET", jobKey, "status", "waiting")
    if rcall("LLEN", ns .. ":g:" .. f[1] .. ":active") == 0 then gmReadyHead(ns, f[1]) end
    staged = staged + 1
  end
end
local nextStaged = rcall("ZRANGE", ns .. ":stage", 0, 0, "WITHSCORES")
local wait = -1
if #nextStaged > 0 then
  wait = math.max(1, tonumber(nextStaged[2]) - now)
  rcall("SET", ns .. ":stage:timer", "1", "PX", wait)
else
  rcall("DEL", ns .. ":stage:timer")
end
return {delayed, staged, wait}
