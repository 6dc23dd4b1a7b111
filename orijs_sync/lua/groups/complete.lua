--[[
  Finish many active jobs of one worker (completed) in one call and, for each,
  reserve the next job of its group for the same worker (GroupMQ's
  complete-and-reserve-next), so no other worker slips in between and the
  worker's slot goes straight to the group's next job.

  KEYS[1] ns
  ARGV[1] reservation token of the next jobs taken  ARGV[2] now (ms, the finish time)
  ARGV[3] visibility timeout (ms)  ARGV[4] keepCompleted  ARGV[5] take the next jobs (1/0)
  ARGV[6..] per job, four values: job id, group id, the token of the run that finished
            (its reservation's), JSON list of hash fields to record (field, value, ...;
            read only when keepCompleted > 0)
  Returns one entry per job: 0 when it was no longer ours (stalled and recovered,
  removed), 1 when finished, or the reply of its group's next job, now reserved.
]]
local rcall = redis.call
--- @include "groups/core"

local ns, token = KEYS[1], ARGV[1]
local now, vt, keep = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local chain = ARGV[5] == "1" and rcall("EXISTS", ns .. ":paused") == 0
local out = {}
for i = 6, #ARGV, 4 do
  local jobId, gid = ARGV[i], ARGV[i + 1]
  local result = 0
  if gmRelease(ns, jobId, gid, ARGV[i + 2]) then
    result = 1
    gmRecordFinished(ns, jobId, "completed", now, keep,
                     keep > 0 and cjson.decode(ARGV[i + 3]) or {})
    local nextJob = chain and gmTakeHead(ns, gid, now, vt, token)
    if nextJob then
      result = nextJob
    else
      gmReadyHead(ns, gid)
    end
  end
  out[#out + 1] = result
end
return out
