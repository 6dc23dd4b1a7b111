--[[
  Moves up to ARGV[4] ready jobs to active, each locked with its own token.

  KEYS[1] wait   KEYS[2] active   KEYS[3] marker
  ARGV[1] queue key base
  ARGV[2] timestamp (ms)
  ARGV[3] JSON {tokenBase, tokenStart (the jobs' lock tokens: see tokenAt) or
          fixedToken (the caller's own token, for one job), lockDuration,
          limiter = {max, duration}?, name?, children? (also return each job's
          processed children), limited? (a worker without a limiter that hit a
          manual rate limit: the limiter key's ttl holds it back), lost? (token
          ranges of calls whose reply was lost: their jobs are taken first)}
  ARGV[4] how many jobs at most
  Returns {jobs, rateLimitTtl, nextDelayedTimestamp}; jobs is a list of
  {fields, jobId, token, children} (children: the processed hash as a flat
  list, empty unless asked for).
]]
local rcall = redis.call
--- @include "activate"

local qk = ARGV[1]
local opts = cjson.decode(ARGV[3])
local jobs, ttl, nextDelayed = takeJobs(qk, ARGV[2], opts, tonumber(ARGV[4]) or 1)
return {jobs, ttl, nextDelayed}
