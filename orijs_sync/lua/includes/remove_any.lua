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

-- Whether the job is in one of the states named in a comma-separated list of key suffixes.
local function isInStates(qk, jobId, states)
  for state in string.gmatch(states, "[^,]+") do
    if state == "wait" or state == "paused" or state == "active" then
      if rcall("LPOS", qk .. state, jobId) then return true end
    elseif rcall("ZSCORE", qk .. state, jobId) then
      return true
    end
  end
  return false
end
