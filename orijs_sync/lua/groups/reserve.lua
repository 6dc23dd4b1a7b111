--[[
  Reserve up to `max` jobs, at most one per group and only from groups with no
  active job: first from the preferred group (the one a blocking pop on ready
  just took), then from the lowest-scored ready groups. Groups seen busy or with
  a delayed head leave ready (their release or promotion puts them back), so a
  worker never spins on them.

  KEYS[1] ns
  ARGV[1] now (ms)  ARGV[2] visibility timeout (ms)  ARGV[3] max jobs
  ARGV[4] preferred group id ("" = none)  ARGV[5] reservation token
  ARGV[6] most groups to look at
  Returns a list of job replies (see gmReply); empty when paused.
]]
local rcall = redis.call
--- @include "groups/core"

local ns = KEYS[1]
local now, vt, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local token, scanLimit = ARGV[5], tonumber(ARGV[6])
local out = {}

if rcall("EXISTS", ns .. ":paused") == 1 then
  if ARGV[4] ~= "" then gmReadyHead(ns, ARGV[4]) end
  return out
end

if ARGV[4] ~= "" then
  local job = gmTakeHead(ns, ARGV[4], now, vt, token)
  if job then out[#out + 1] = job end
end

local looked = 0
while #out < max and looked < scanLimit do
  local groups = rcall("ZRANGE", ns .. ":ready", 0, max - #out - 1)
  if #groups == 0 then break end
  for _, gid in ipairs(groups) do
    looked = looked + 1
    local job = gmTakeHead(ns, gid, now, vt, token)
    if job then out[#out + 1] = job end
  end
end
return out
