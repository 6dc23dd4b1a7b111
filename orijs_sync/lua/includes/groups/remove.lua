--[[
  Removing one job of a group queue whatever its state: out of every set, its
  hash, processing hash and unique key deleted; its group, when no job of it is
  active, back in ready at its new head (or dropped when empty).
]]
--- @include "groups/core"

local function gmRemoveJob(ns, jobId)
  local jobKey = ns .. ":job:" .. jobId
  if rcall("EXISTS", jobKey) == 0 then return false end
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
  return true
end
