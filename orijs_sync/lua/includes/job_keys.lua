--[[
  Job key helpers: split a job key, delete a job's keys.
]]

local function jobIdFromKey(jobKey)
  return string.match(jobKey, ".*:(.*)")
end

-- "bull:queue:" for "bull:queue:42"
local function queueBaseFromKey(jobKey)
  local jobId = jobIdFromKey(jobKey)
  return string.sub(jobKey, 1, #jobKey - #jobId)
end

local function removeJobKeys(jobKey)
  return rcall("DEL", jobKey, jobKey .. ":logs", jobKey .. ":dependencies",
               jobKey .. ":processed", jobKey .. ":failed", jobKey .. ":unsuccessful",
               jobKey .. ":lock")
end
