--[[
  Removes every job waiting to run: wait, paused, prioritized, and delayed
  when ARGV[2] is "1". Active and finished jobs stay.
  KEYS[1] events   ARGV[1] queue key base   ARGV[2] "1" to drain delayed too
  Returns how many jobs were removed.
]]
local rcall = redis.call
--- @include "remove_job"

local qk = ARGV[1]
local removed = 0
local function removeAll(ids)
  for _, jobId in ipairs(ids) do
    removeJob(qk, jobId, true)
    removed = removed + 1
  end
end
for _, list in ipairs({"wait", "paused"}) do
  removeAll(rcall("LRANGE", qk .. list, 0, -1))
  rcall("DEL", qk .. list)
end
removeAll(rcall("ZRANGE", qk .. "prioritized", 0, -1))
rcall("DEL", qk .. "prioritized", qk .. "pc", qk .. "marker")
if ARGV[2] == "1" then
  removeAll(rcall("ZRANGE", qk .. "delayed", 0, -1))
  rcall("DEL", qk .. "delayed")
end
return removed
