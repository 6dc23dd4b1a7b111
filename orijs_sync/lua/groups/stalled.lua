--[[
  Recover jobs whose deadline passed (their worker died or froze): each leaves
  the processing set and its group's active slot, so the group is free again,
  and goes back to its place in its group; a job found stalled more than
  maxStalledCount times fails instead.

  KEYS[1] ns
  ARGV[1] now (ms)  ARGV[2] grace (ms)  ARGV[3] maxStalledCount  ARGV[4] most jobs
  Returns a flat list: job id, group id, "recovered" | "failed", ...
]]
local rcall = redis.call
--- @include "groups/core"
--- @include "stored"

local ns, now = KEYS[1], tonumber(ARGV[1])
local maxStalled = tonumber(ARGV[3])
local out = {}
local ids = rcall("ZRANGEBYSCORE", ns .. ":processing", 0, now - tonumber(ARGV[2]),
                  "LIMIT", 0, tonumber(ARGV[4]))
for _, jobId in ipairs(ids) do
  local jobKey = ns .. ":job:" .. jobId
  local procKey = ns .. ":processing:" .. jobId
  local gid = rcall("HGET", jobKey, "groupId") or rcall("HGET", procKey, "groupId")
  rcall("ZREM", ns .. ":processing", jobId)
  rcall("DEL", procKey)
  if gid then
    rcall("LREM", ns .. ":g:" .. gid .. ":active", 1, jobId)
    local status = rcall("HGET", jobKey, "status")
    if status == "processing" then
      local stalled = raiseCounter(jobKey, "stalledCount")
      local action = "recovered"
      if stalled > maxStalled then
        action = "failed"
        rcall("HSET", jobKey, "status", "failed", "finishedOn", tostring(now),
              "failedReason", "job stalled more than allowable limit (" .. stalled .. " times)")
        rcall("ZADD", ns .. ":failed", now, jobId)
      else
        rcall("HSET", jobKey, "status", "waiting")
        rcall("ZADD", ns .. ":g:" .. gid, gmScore(jobKey), jobId)
        rcall("SADD", ns .. ":groups", gid)
      end
      out[#out + 1] = jobId
      out[#out + 1] = gid
      out[#out + 1] = action
    end
    gmReadyHead(ns, gid)
  end
end
return out
