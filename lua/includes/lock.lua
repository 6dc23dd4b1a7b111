--[[
  Releasing a job's lock: only the token that holds it may.
  Returns 0, -2 (no lock) or -6 (another token holds it).
]]
local function releaseLock(jobKey, stalledKey, jobId, token)
  local current = rcall("GET", jobKey .. ":lock")
  if current ~= token then
    return current and -6 or -2
  end
  rcall("DEL", jobKey .. ":lock")
  rcall("SREM", stalledKey, jobId)
  return 0
end
