--[[
  Cuts a child loose from its parent before it finishes: the parent stops
  waiting for it (and moves on if it was the last pending child).

  KEYS[1] child job key
  ARGV[1] parent key ("" to read it from the child)   ARGV[2] timestamp (ms)
  Returns 0 (removed), 1 (no such dependency), -1 missing child, -5 missing parent.
]]
local rcall = redis.call
--- @include "parents"

local childKey = KEYS[1]
if rcall("EXISTS", childKey) ~= 1 then return -1 end
local parentKey = ARGV[1]
if parentKey == "" then
  parentKey = rcall("HGET", childKey, "parentKey")
  if not parentKey then return 1 end
end
if rcall("EXISTS", parentKey) ~= 1 then return -5 end
if rcall("SREM", parentKey .. ":dependencies", childKey) ~= 1 then return 1 end
moveParentIfNoPendingChildren(queueBaseFromKey(parentKey), parentKey, jobIdFromKey(parentKey), ARGV[2])
rcall("HDEL", childKey, "parentKey", "parent")
return 0
