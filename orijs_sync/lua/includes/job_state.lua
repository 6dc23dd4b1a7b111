--[[
  The state of one job, as BullMQ names it: completed, failed, delayed,
  prioritized, waiting-children, active, waiting (wait or paused list) or
  unknown.
]]
local function jobState(qk, jobId)
  for _, state in ipairs({"completed", "failed", "delayed", "prioritized", "waiting-children"}) do
    if rcall("ZSCORE", qk .. state, jobId) then
      return state
    end
  end
  if rcall("LPOS", qk .. "active", jobId) then return "active" end
  if rcall("LPOS", qk .. "wait", jobId) then return "waiting" end
  if rcall("LPOS", qk .. "paused", jobId) then return "waiting" end
  return "unknown"
end
