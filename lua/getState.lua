--[[
  The state of one job, as BullMQ names it.
  KEYS[1] queue key base ("bull:name:")
  ARGV[1] job id
  Returns completed, failed, delayed, active, waiting (wait or paused list),
  prioritized, waiting-children or unknown.
]]
local rcall = redis.call
local qk, jobId = KEYS[1], ARGV[1]
for _, state in ipairs({"completed", "failed", "delayed", "prioritized", "waiting-children"}) do
  if rcall("ZSCORE", qk .. state, jobId) then
    return state
  end
end
if rcall("LPOS", qk .. "active", jobId) then return "active" end
if rcall("LPOS", qk .. "wait", jobId) then return "waiting" end
if rcall("LPOS", qk .. "paused", jobId) then return "waiting" end
return "unknown"
