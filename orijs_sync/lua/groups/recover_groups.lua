--[[
  Put back in ready the groups that hold runnable jobs but that nothing would put
  back (a slot orphaned by GroupMQ's inline expiry recovery, a group left out of
  ready when GroupMQ's stalled check failed its active job). Walks the groups set
  a slice per call.

  KEYS[1] ns
  ARGV[1] SSCAN cursor  ARGV[2] groups per call
  Returns {next cursor, groups put back}.
]]
local rcall = redis.call
--- @include "groups/core"

local ns = KEYS[1]
local page = rcall("SSCAN", ns .. ":groups", ARGV[1], "COUNT", ARGV[2])
local fixed = 0
for _, gid in ipairs(page[2]) do
  if not gmBusy(ns, gid) and not rcall("ZSCORE", ns .. ":ready", gid) then
    gmReadyHead(ns, gid)
    if rcall("ZSCORE", ns .. ":ready", gid) then fixed = fixed + 1 end
  end
end
return {page[1], fixed}
