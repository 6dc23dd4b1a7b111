--[[
  Removing a job with its children down the tree (BullMQ's remove with
  removeChildren, and removeUnprocessedChildren). A child key
  "{prefix}:{queue}:{id}" names the child's queue: children in other queues go too.
  Which children: "all" (done or not), "pending" (those still waited for, as
  removeUnprocessedChildren: a locked or failed one stays, with its own) or "none".
]]
--- @include "remove_job"
--- @include "remove_any"

-- The job, or (withChildren) a child it still waits for, down the tree, is locked.
local function isLockedTree(jobKey, withChildren)
  if rcall("EXISTS", jobKey .. ":lock") == 1 then return true end
  if withChildren then
    for _, childKey in ipairs(rcall("SMEMBERS", jobKey .. ":dependencies")) do
      if isLockedTree(childKey, true) then return true end
    end
  end
  return false
end

-- The keys of a job's children of that kind (see above).
local function childrenOf(jobKey, which)
  if which == "none" then return {} end
  local keys = rcall("SMEMBERS", jobKey .. ":dependencies")
  if which == "all" then
    local done = {rcall("HKEYS", jobKey .. ":processed"), rcall("HKEYS", jobKey .. ":failed"),
                  rcall("ZRANGE", jobKey .. ":unsuccessful", 0, -1)}
    for _, list in ipairs(done) do
      for _, key in ipairs(list) do table.insert(keys, key) end
    end
  end
  return keys
end

local removeTree

-- Removes the children of a job (of that kind), each with its own. Returns how many jobs went.
local function removeChildrenOf(jobKey, which)
  local removed = 0
  for _, childKey in ipairs(childrenOf(jobKey, which)) do
    local childQk, childId = queueBaseFromKey(childKey), jobIdFromKey(childKey)
    local stays = rcall("EXISTS", childKey) ~= 1 or (which == "pending" and
      (rcall("EXISTS", childKey .. ":lock") == 1 or rcall("ZSCORE", childQk .. "failed", childId)))
    if not stays then
      removed = removed + removeTree(childQk, childId, which)
    end
  end
  return removed
end

-- Removes an existing job and its children (of that kind), each with a "removed" event
-- on its queue's stream. The job leaves its state first, so the removal of its children
-- never makes it ready. Returns how many jobs went.
removeTree = function(qk, jobId, which)
  local prev = removeFromAnyState(qk, jobId) or "unknown"
  local removed = 1 + removeChildrenOf(qk .. jobId, which)
  removeJob(qk, jobId, true)
  rcall("XADD", qk .. "events", "MAXLEN", "~", getOrSetMaxEvents(qk .. "meta"), "*",
        "event", "removed", "jobId", jobId, "prev", prev)
  return removed
end
