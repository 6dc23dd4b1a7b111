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

-- The common start of moving an active job elsewhere: the job exists, its lock
-- is ours (released), it leaves the active list, and fields are set.
-- Returns 0 or -1 (missing), -2/-6 (lock), -3 (not active).
local function takeFromActive(jobKey, activeKey, stalledKey, jobId, token, fieldsJson)
  if rcall("EXISTS", jobKey) ~= 1 then return -1 end
  local code = releaseLock(jobKey, stalledKey, jobId, token)
  if code < 0 then return code end
  if rcall("LREM", activeKey, -1, jobId) < 1 then return -3 end
  local fields = cjson.decode(fieldsJson)
  if #fields > 0 then rcall("HSET", jobKey, unpack(fields)) end
  return 0
end
