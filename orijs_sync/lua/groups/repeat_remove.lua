--[[
  Remove a repeating job found by (group, repeat options): its definition,
  schedule entry, lookup and placeholder job. Runs already added stay.

  KEYS[1] ns
  ARGV[1] lookup suffix ("{groupId}:{repeat JSON}")
  Returns 1 when removed, 0 when there was no such repeating job.
]]
local rcall = redis.call
local ns = KEYS[1]
local lookup = ns .. ":repeat:lookup:" .. ARGV[1]
local repeatKey = rcall("GET", lookup)
if not repeatKey then return 0 end
rcall("DEL", lookup, ns .. ":repeat:" .. repeatKey, ns .. ":job:repeat:" .. repeatKey)
rcall("ZREM", ns .. ":repeat:schedule", repeatKey)
return 1
