--[[
  Adding one job: standard (wait/paused), prioritized, delayed, or a flow
  parent waiting for its children. A custom id that exists already, or a
  deduplication id still held, adds nothing and gives the existing id.
]]
--- @include "dedup"

-- Returns {job id, 1 if the job existed already (nothing added) else 0, and for a
-- job added now the id of its "added" event}, or -5 (parent missing), -7 (the id
-- belongs to another parent).
local function addJob(qk, maxEvents, jobId, name, timestamp, data, optsJson, parentKey,
                      parentJson, parentDepsKey, repeatJobKey, waitChildren)
  if parentKey and rcall("EXISTS", parentKey) ~= 1 then return -5 end
  local counter = rcall("INCR", qk .. "id")
  if jobId == "" then jobId = tostring(counter) end
  local jobKey = qk .. jobId

  if rcall("EXISTS", jobKey) == 1 then
    local existingParent = rcall("HGET", jobKey, "parentKey")
    if parentKey and existingParent and existingParent ~= parentKey
       and rcall("EXISTS", existingParent) == 1 then
      return -7
    end
    rcall("XADD", qk .. "events", "MAXLEN", "~", maxEvents, "*", "event", "duplicated",
          "jobId", jobId)
    return {jobId, 1}
  end

  local job = {id = jobId, name = name, timestamp = timestamp, data = data,
               optsJson = optsJson, opts = cjson.decode(optsJson), parentKey = parentKey,
               parentJson = parentJson, parentDepsKey = parentDepsKey,
               repeatJobKey = repeatJobKey, waitChildren = waitChildren}
  -- A flow parent waits for its children, never delayed: BullMQ does not replace it.
  local held = deduplicateJob(qk, maxEvents, job, not waitChildren)
  if held then return {held, 1} end
  return {jobId, 0, storeNewJob(qk, maxEvents, job)}
end
