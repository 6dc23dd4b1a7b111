--[[
  Removes the children a parent still waits for, down their trees (BullMQ's
  removeUnprocessedChildren). A locked child (being processed) stays, and so does
  one that failed, each with its own children. The parent, once it waits for
  nothing, moves on to wait.
  KEYS[1] parent job key
  Returns how many jobs were removed, or -1 when the parent does not exist.
]]
local rcall = redis.call
--- @include "remove_tree"

if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
return removeChildrenOf(KEYS[1], "pending")
