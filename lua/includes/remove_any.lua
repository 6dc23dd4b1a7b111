--[[
  Taking a job out of whatever state holds it.
  Returns the state's key suffix, or nil when no state held it.
]]
local function removeFromAnyState(qk, jobId)
  for _, list in ipairs({"wait", "paused", "active"}) do
    if rcall("LREM", qk .. list, 0, jobId) > 0 then return list end
  end
  for _, set in ipairs({"delayed", "prioritized", "completed", "failed", "waiting-children"}) do
    if rcall("ZREM", qk .. set, jobId) == 1 then return set end
  end
  return nil
end
