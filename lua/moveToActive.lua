--[[
  Moves up to ARGV[4] ready jobs to active, each locked with its own token.

  KEYS[1] wait   KEYS[2] active   KEYS[3] marker
  ARGV[1] queue key base
  ARGV[2] timestamp (ms)
  ARGV[3] JSON {tokenBase, tokenStart (the jobs' lock tokens: see tokenAt),
          lockDuration, limiter = {max, duration}?, name?, children? (also return
          each job's processed children)}
  ARGV[4] how many jobs at most
  Returns {jobs, rateLimitTtl, nextDelayedTimestamp}; jobs is a list of
  {fields, jobId, token, children} (children: the processed hash as a flat
  list, empty unless asked for).
]]
local rcall = redis.call
--- @include "activate"

local qk = ARGV[1]
local opts = cjson.decode(ARGV[3])
local wanted = tonumber(ARGV[4]) or 1
local jobs = {}
local ttl, nextDelayed = 0, 0
for i = 1, wanted do
  opts["token"] = tokenAt(opts, i)
  local result = fetchNextJob(qk, ARGV[2], opts)
  if result[2] == 0 then
    ttl, nextDelayed = result[3], result[4]
    break
  end
  table.insert(jobs, {result[1], result[2], opts["token"], result[5]})
  if not result[6] and i < wanted then
    nextDelayed = nothingLeft(qk)
    break
  end
end
return {jobs, ttl, nextDelayed}
