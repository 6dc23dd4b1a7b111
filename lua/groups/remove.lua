--[[
  Remove a job whatever its state. An active job's group is released (its
  worker's finish is then refused).

  KEYS[1] ns
  ARGV[1] job id
  Returns 1 when removed, 0 when there was no such job.
]]
local rcall = redis.call
--- @include "groups/core"

local ns, jobId = KEYS[1], ARGV[1]
local jobKey = ns .. ":job:" .. jobId
if rcall("EXISTS", jobKey) == 0 then return 0 end
local gid = rcall("HGET", jobKey, "groupId")
for _, set in ipairs({"delayed", "stage", "processing", "completed", "failed"}) do
  rcall("ZREM", ns .. ":" .. set, jobId)
end
rcall("DEL", jobKey, ns .. ":processing:" .. jobId, ns .. ":unique:" .. jobId)
if gid then
  rcall("ZREM", ns .. ":g:" .. gid, jobId)
  rcall("LREM", ns .. ":g:" .. gid .. ":active", 0, jobId)
  if rcall("LLEN", ns .. ":g:" .. gid .. ":active") == 0 then gmReadyHead(ns, gid) end
end
return 1
