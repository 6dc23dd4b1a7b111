--[[
  Removes a legacy repeatable job (BullMQ's deprecated opts.repeat) and its next
  run while that run is still delayed, as BullMQ's removeRepeatable does: first
  under its legacy key (the options joined, as BullMQ 3 stored them), else under
  its repeat key (with its hash repeat:<key>).

  KEYS[1] repeat zset   KEYS[2] delayed   KEYS[3] events
  ARGV[1] the legacy run id's prefix ("repeat:<hash>:", the run's ms follow)
  ARGV[2] legacy key ("" for none)   ARGV[3] repeat key
  ARGV[4] queue key base ("bull:name:")
  Returns 1 when the repeatable job existed, 0 otherwise.
]]
local rcall = redis.call
--- @include "job_keys"

local repeatKey, delayedKey, eventsKey = KEYS[1], KEYS[2], KEYS[3]
local qk = ARGV[4]

local function removeNextRun(runId)
  if rcall("ZREM", delayedKey, runId) == 1 then
    removeJobKeys(qk .. runId)
    rcall("XADD", eventsKey, "*", "event", "removed", "jobId", runId, "prev", "delayed")
  end
end

if ARGV[2] ~= "" then
  local millis = rcall("ZSCORE", repeatKey, ARGV[2])
  if millis then removeNextRun(ARGV[1] .. millis) end
  if rcall("ZREM", repeatKey, ARGV[2]) == 1 then return 1 end
end

local millis = rcall("ZSCORE", repeatKey, ARGV[3])
if millis then removeNextRun("repeat:" .. ARGV[3] .. ":" .. millis) end
if rcall("ZREM", repeatKey, ARGV[3]) == 1 then
  rcall("DEL", repeatKey .. ":" .. ARGV[3])
  return 1
end
return 0
