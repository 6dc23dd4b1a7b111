--[[
  Adds a batch of jobs to one queue (add() is a batch of one, add_bulk() many),
  each as BullMQ's add of that kind of job would store it.

  KEYS[1] meta   KEYS[2] id counter   KEYS[3] events
  ARGV[1] queue key base ("bull:name:")
  ARGV[2] how many jobs (n), then 10 arguments per job:
          job id ("" to generate one), name, timestamp (ms), data (JSON text,
          stored as is), opts (JSON text in BullMQ's encoding, stored as is),
          parent key, parent (JSON {id, queueKey, fpof...}), parent's
          dependencies key, repeat job key, "1" to wait for children
          ("" for each optional one left out)
  ARGV[3 + n * 10] (optional) JSON take options of a worker (moveToActive's, and
          ts: the timestamp of the take): after the adds, one job is taken for that
          worker as moveToActive would take it (the oldest waiting), so a worker of
          the adding process is handed it without a marker waking its fetcher.
          The reply is then {results, jobs}, jobs as moveToActive returns them.
  Returns one result per job: {id, 1 if that job existed already (a custom
  id or a deduplication id in use) else 0, and for a job written now the id of
  its "added" event}, or -5 when its parent is
  missing, -7 when a job with that id belongs to another parent.
]]
local rcall = redis.call
--- @include "add_job"
--- @include "activate"

local qk = ARGV[1]
local maxEvents = getOrSetMaxEvents(KEYS[1])
local n = tonumber(ARGV[2])
local results = {}
local function opt(value)
  if value == "" then return nil end
  return value
end
for i = 0, n - 1 do
  local a = 3 + i * 10
  results[i + 1] = addJob(qk, maxEvents, ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
                          ARGV[a + 4], opt(ARGV[a + 5]), opt(ARGV[a + 6]), opt(ARGV[a + 7]),
                          opt(ARGV[a + 8]), ARGV[a + 9] == "1")
end
local take = ARGV[3 + n * 10]
if take then
  take = cjson.decode(take)
  local jobs = takeJobs(qk, take["ts"], take, 1)
  return {results, jobs}
end
return results
