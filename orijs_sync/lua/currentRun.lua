--[[
  What a waiter for one job needs to know before it listens to the events
  stream, read at one instant: the job's state, its returnvalue and
  failedReason, and the id of the stream's last event (a finish of the
  current run is written after it).
  KEYS[1] queue key base ("bull:name:")
  KEYS[2] events stream
  ARGV[1] job id
  Returns {state, returnvalue or false, failedReason or false, last event id
  or "0-0"}.
]]
local rcall = redis.call
--- @include "job_state"

local qk, jobId = KEYS[1], ARGV[1]
local fields = rcall("HMGET", qk .. jobId, "returnvalue", "failedReason")
local last = rcall("XREVRANGE", KEYS[2], "+", "-", "COUNT", 1)
local lastId = "0-0"
if last[1] then
  lastId = last[1][1]
end
return {jobState(qk, jobId), fields[1], fields[2], lastId}
