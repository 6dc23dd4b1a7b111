--[[
  A finished job (completed or failed) back to wait, as job.retry() and the
  queue's retryJobs move it: its result cleared, its parent waiting for it again.
]]
--- @include "enqueue"

-- The parent counted this child as done (processed, failed or ignored): it waits
-- for it again.
local function parentWaitsAgain(jobKey, state)
  local parentKey = rcall("HGET", jobKey, "parentKey")
  if not parentKey or rcall("EXISTS", parentKey) ~= 1 then return end
  local wasCounted
  if state == "failed" then
    wasCounted = rcall("ZREM", parentKey .. ":unsuccessful", jobKey) == 1
                 or rcall("HDEL", parentKey .. ":failed", jobKey) == 1
  else
    wasCounted = rcall("HDEL", parentKey .. ":processed", jobKey) == 1
  end
  if wasCounted then rcall("SADD", parentKey .. ":dependencies", jobKey) end
end

-- state: "completed" | "failed"; resetAtm / resetAts: clear attemptsMade / attemptsStarted.
-- Returns 0, -1 (missing job) or -3 (not in that state).
local function reprocessFinished(qk, jobId, state, resetAtm, resetAts)
  local jobKey = qk .. jobId
  if rcall("EXISTS", jobKey) ~= 1 then return -1 end
  if rcall("ZREM", qk .. state, jobId) ~= 1 then return -3 end
  local drop = {"finishedOn", "processedOn", state == "failed" and "failedReason" or "returnvalue"}
  if resetAtm then table.insert(drop, "atm") end
  if resetAts then table.insert(drop, "ats") end
  rcall("HDEL", jobKey, unpack(drop))
  parentWaitsAgain(jobKey, state)
  -- opts another program wrote that are not JSON: not lifo (the job still moves)
  local ok, opts = pcall(cjson.decode, rcall("HGET", jobKey, "opts") or "{}")
  local lifo = ok and type(opts) == "table" and opts["lifo"]
  enqueueReadyJob(qk, jobId, storedPriority(rcall("HGET", jobKey, "priority")), lifo, state)
  return 0
end
