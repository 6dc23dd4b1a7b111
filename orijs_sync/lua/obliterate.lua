--[[
  Deletes a whole queue, a batch of jobs per call; call again while it returns 1.
  KEYS[1] meta   KEYS[2] active
  ARGV[1] queue key base   ARGV[2] batch size   ARGV[3] "1" to force while jobs are active
  Returns 0 done, 1 more to do, -2 refused (active jobs and no force).
]]
local rcall = redis.call
--- @include "job_keys"

local qk, batch = ARGV[1], tonumber(ARGV[2])
if ARGV[3] ~= "1" and rcall("LLEN", KEYS[2]) > 0 then return -2 end
local left = batch
local function deleteJobs(ids)
  for _, jobId in ipairs(ids) do removeJobKeys(qk .. jobId) end
end
for _, list in ipairs({"active", "wait", "paused"}) do
  local ids = rcall("LRANGE", qk .. list, -left, -1)
  deleteJobs(ids)
  rcall("LTRIM", qk .. list, 0, -#ids - 1)
  left = left - #ids
  if left <= 0 then return 1 end
end
for _, set in ipairs({"delayed", "prioritized", "completed", "failed", "waiting-children"}) do
  local ids = rcall("ZRANGE", qk .. set, 0, left - 1)
  deleteJobs(ids)
  if #ids > 0 then rcall("ZREM", qk .. set, unpack(ids)) end
  left = left - #ids
  if left <= 0 then return 1 end
end
local fixed = {"meta", "events", "id", "pc", "marker", "stalled", "stalled-check", "limiter",
               "metrics", "metrics:data", "repeat", "wait", "paused", "active", "delayed",
               "prioritized", "completed", "failed", "waiting-children"}
for _, suffix in ipairs(fixed) do rcall("DEL", qk .. suffix) end
return 0
