--[[
  Moves a batch of active jobs to completed or failed, then takes up to
  ARGV[3] next jobs for the same worker: one round trip for many jobs, each
  ending in exactly the keys and events BullMQ writes for one.

  KEYS[1] active   KEYS[2] events   KEYS[3] meta   KEYS[4] stalled
  ARGV[1] queue key base
  ARGV[2] timestamp (ms)
  ARGV[3] how many next jobs to take (0 = none)
  ARGV[4] JSON {tokenBase, tokenStart | fixedToken, lockDuration, limiter?, name?, children?,
          limited?} for the
          next jobs (as moveToActive's), maxMetricsSize (when the worker records
          metrics: see includes/metrics) and parent? = {qk, and the same options of
          another worker}: when a finished job makes its parent ready in queue qk,
          one job of qk is taken for that worker too (the parent, unless older jobs
          wait there), so the parent's worker is not woken to take it; also when
          parent.lost is set (that worker's jobs of a lost reply: see takeLost)
  ARGV[5] how many jobs to finish (n), then 7 arguments per job:
          job id, token, "completed" | "failed", return value (JSON text) or
          failed reason, JSON list of job fields to set, JSON keepJobs
          {count, age, limit}, attempts
  Returns {codes, jobs, parentJobs, rateLimitTtl, nextDelayedTimestamp}: one code
  per finished job (the id of its completed/failed event, or a negative code of
  finishJob), the next jobs, rate limit ttl and next delayed job as moveToActive
  returns them, and the job taken for opts.parent (none or one, in the same form).
]]
local rcall = redis.call
--- @include "activate"
--- @include "finish"
--- @include "metrics"

local qk, timestamp = ARGV[1], ARGV[2]
trimEvents(KEYS[3], KEYS[2])
local opts = cjson.decode(ARGV[4])
local maxPoints = tonumber(opts["maxMetricsSize"])
local codes = {}
local n = tonumber(ARGV[5])
for i = 0, n - 1 do
  local a = 6 + i * 7
  codes[i + 1] = finishJob(qk, ARGV[a], timestamp, ARGV[a + 2], ARGV[a + 3], ARGV[a + 1],
                           ARGV[a + 4], cjson.decode(ARGV[a + 5]), ARGV[a + 6])
  if maxPoints and type(codes[i + 1]) == "string" then
    recordMetric(qk .. "metrics:" .. ARGV[a + 2], maxPoints, timestamp)
  end
end

local jobs, ttl, nextDelayed = takeJobs(qk, timestamp, opts, tonumber(ARGV[3]))
if #jobs == 0 and not jobsWaiting(qk) and rcall("LLEN", KEYS[1]) == 0 then
  rcall("XADD", KEYS[2], "*", "event", "drained")
end
local parentJobs = {}
local parent = opts["parent"]
if parent and (parentsMadeReady[parent["qk"]] or parent["lost"]) then
  parentJobs = takeJobs(parent["qk"], timestamp, parent, 1)
end
return {codes, jobs, parentJobs, ttl, nextDelayed}
