--[[
  GroupMQ 1.1's clean: remove up to `limit` jobs of one state whose score in that
  state's set is at most graceAt (completed/failed: finished at or before it;
  delayed: due at or before it), each as a removal does (groups stay consistent).

  KEYS[1] ns
  ARGV[1] status (completed | failed | delayed)  ARGV[2] graceAt (epoch ms)
  ARGV[3] limit
  Returns how many jobs were removed.
]]
local rcall = redis.call
--- @include "groups/remove"

local ns = KEYS[1]
local ids = rcall("ZRANGEBYSCORE", ns .. ":" .. ARGV[1], "-inf", ARGV[2], "LIMIT", 0, ARGV[3])
local removed = 0
for _, jobId in ipairs(ids) do
  if gmRemoveJob(ns, jobId) then
    removed = removed + 1
  else
    rcall("ZREM", ns .. ":" .. ARGV[1], jobId)     -- a stale id whose hash is gone
  end
end
return removed
