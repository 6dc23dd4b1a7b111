--[[
  The queue's rate limiter key: how long until a limit passes.
]]

-- What a manual rate limit (BullMQ's queue.rateLimit / worker.rateLimit) sets the
-- limiter key to: Number.MAX_SAFE_INTEGER, more than any max.
local MANUAL_RATE_LIMIT = 9007199254740991

-- Milliseconds until the limiter key expires when it has counted maxJobs (or more);
-- else 0 (a key at 0 ms left is deleted), as BullMQ's getRateLimitTTL.
local function rateLimitTtl(maxJobs, limiterKey)
  if maxJobs and maxJobs <= tonumber(rcall("GET", limiterKey) or 0) then
    local pttl = rcall("PTTL", limiterKey)
    if pttl == 0 then
      rcall("DEL", limiterKey)
    end
    if pttl > 0 then
      return pttl
    end
  end
  return 0
end
