--[[
  How long the queue's rate limit still holds (BullMQ's getRateLimitTtl).
  KEYS[1] limiter   KEYS[2] meta
  ARGV[1] max jobs, or "0": the global max of the meta hash when set
  Returns the limiter key's ms left once it has counted that max (else 0); with no
  max at all, the key's PTTL as it is (-2: no key, -1: no expiry).
]]
local rcall = redis.call
--- @include "rate_limit"

if ARGV[1] ~= "0" then
  return rateLimitTtl(tonumber(ARGV[1]), KEYS[1])
end
local max = rcall("HGET", KEYS[2], "max")
if max then
  return rateLimitTtl(tonumber(max), KEYS[1])
end
return rcall("PTTL", KEYS[1])
