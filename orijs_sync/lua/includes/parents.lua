--[[
  Parent/child bookkeeping of flows. A parent waits in "waiting-children"
  while its ":dependencies" set holds child keys; a completed child's return
  value goes to the parent's ":processed" hash.
]]
--- @include "enqueue"
--- @include "job_keys"

-- The queues (key bases) in which this call made a parent ready: a finishing call
-- may take that parent at once (moveToFinished's opts.parent).
local parentsMadeReady = {}

-- Moves a parent out of waiting-children to delayed, prioritized or wait.
local function moveParentToWait(parentQk, parentKey, parentId, timestamp)
  local attrs = rcall("HMGET", parentKey, "priority", "delay")
  local priority = storedPriority(attrs[1])
  local delay = tonumber(attrs[2]) or 0
  if delay > 0 then
    local runAt = tonumber(timestamp) + delay
    rcall("ZADD", parentQk .. "delayed", runAt * 0x1000, parentId)
    rcall("XADD", parentQk .. "events", "*", "event", "delayed", "jobId", parentId, "delay", runAt)
    addDelayMarker(parentQk .. "marker", parentQk .. "delayed")
  else
    -- next in line (BullMQ's RPUSH): its children ran, it waited its turn already
    enqueueReadyJob(parentQk, parentId, priority, true, "waiting-children")
    parentsMadeReady[parentQk] = true
  end
end

local function moveParentIfWaiting(parentQk, parentKey, parentId, timestamp)
  if rcall("EXISTS", parentKey) == 1
     and rcall("ZREM", parentQk .. "waiting-children", parentId) == 1 then
    moveParentToWait(parentQk, parentKey, parentId, timestamp)
  end
end

local function moveParentIfNoPendingChildren(parentQk, parentKey, parentId, timestamp)
  if rcall("SCARD", parentKey .. ":dependencies") == 0 then
    moveParentIfWaiting(parentQk, parentKey, parentId, timestamp)
  end
end

local function onChildCompleted(parentKey, childKey, returnvalue, timestamp)
  if rcall("SREM", parentKey .. ":dependencies", childKey) == 1 then
    rcall("HSET", parentKey .. ":processed", childKey, returnvalue)
    local parentId = jobIdFromKey(parentKey)
    moveParentIfNoPendingChildren(queueBaseFromKey(parentKey), parentKey, parentId, timestamp)
  end
end

-- A child failed for good: apply its parent option (fpof, cpof, idof, rdof).
local function onChildFailed(rawParent, childKey, failedReason, timestamp)
  if not rawParent then return end
  -- A parent field written by hand may not be JSON: the child still fails.
  local ok, parent = pcall(cjson.decode, rawParent)
  if not ok or type(parent) ~= "table" or type(parent["queueKey"]) ~= "string"
     or parent["id"] == nil then return end
  local parentQk = parent["queueKey"] .. ":"
  local parentId = parent["id"]
  local parentKey = parentQk .. parentId
  -- A plain child (no option) keeps its parent waiting, as BullMQ does.
  if not (parent["fpof"] or parent["cpof"] or parent["idof"] or parent["rdof"]) then return end
  if rcall("SREM", parentKey .. ":dependencies", childKey) ~= 1 then return end
  if parent["fpof"] then
    rcall("ZADD", parentKey .. ":unsuccessful", timestamp, childKey)
    if rcall("EXISTS", parentKey) == 1 then
      local reason = "child " .. childKey .. " failed"
      local waiting = rcall("ZREM", parentQk .. "waiting-children", parentId) == 1
      if not waiting and rcall("ZREM", parentQk .. "delayed", parentId) == 1 then
        rcall("HSET", parentKey, "delay", 0)
        waiting = true
      end
      if waiting then
        rcall("HSET", parentKey, "defa", reason)
        moveParentToWait(parentQk, parentKey, parentId, timestamp)
      elseif not rcall("ZSCORE", parentQk .. "failed", parentId) then
        rcall("HSET", parentKey, "defa", reason)
      end
    end
  elseif parent["cpof"] then
    rcall("HSET", parentKey .. ":failed", childKey, failedReason)
    moveParentIfWaiting(parentQk, parentKey, parentId, timestamp)
  elseif parent["idof"] or parent["rdof"] then
    if parent["idof"] then
      rcall("HSET", parentKey .. ":failed", childKey, failedReason)
    end
    moveParentIfNoPendingChildren(parentQk, parentKey, parentId, timestamp)
  end
end

-- A child is removed: drop it from its parent's pending set and release the parent if it was the last.
local function removeFromParent(childKey)
  local parentKey = rcall("HGET", childKey, "parentKey")
  if type(parentKey) ~= "string" or parentKey == "" then return end
  if rcall("SREM", parentKey .. ":dependencies", childKey) == 1 then
    local parentId = jobIdFromKey(parentKey)
    local parentQk = queueBaseFromKey(parentKey)
    if rcall("SCARD", parentKey .. ":dependencies") == 0
       and rcall("ZREM", parentQk .. "waiting-children", parentId) == 1 then
      enqueueReadyJob(parentQk, parentId, storedPriority(rcall("HGET", parentKey, "priority")),
                      true, "waiting-children")
    end
  end
end
