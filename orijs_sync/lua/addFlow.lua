--[[
  Adds a whole flow (one or many trees of parent/child jobs, across queues), all
  or nothing: every node is checked before any is written, so a refused node
  leaves no parent stuck in waiting-children and no orphan children.

  KEYS: three per node, in node order: its queue's meta, id counter, events
  ARGV[1] how many nodes (n), parents before their children, then 11 arguments
          per node: its queue key base ("bull:name:"), then the 10 arguments of
          one job of addJob.lua (job id, never "" here; name; timestamp; data;
          opts; parent key; parent JSON; parent's dependencies key; repeat job
          key; "1" to wait for children)
  ARGV[2 + n * 11] (optional) JSON list of take options (each as addJob.lua's,
          with qk: the key base of the queue to take from): after the adds, one job
          is taken for each, as moveToActive would take it. The reply is then
          {results, {jobs of each take}}.
  Returns one addJob result per node ({id, 1 if it existed already else 0}), or
  {code, i} when node i (1-based) is refused, nothing written: -5 its parent
  does not exist, -7 a job with its id belongs to another parent.
]]
local rcall = redis.call
--- @include "add_job"
--- @include "activate"

local n = tonumber(ARGV[1])
local function arg(i, j)          -- j = 0: the node's queue key base; 1..10: addJob's
  return ARGV[2 + (i - 1) * 11 + j]
end
local function opt(value)
  if value == "" then return nil end
  return value
end

-- First pass: what addJob would refuse, with the keys this flow adds counted in.
local adding = {}
for i = 1, n do
  local jobKey = arg(i, 0) .. arg(i, 1)
  local parentKey = opt(arg(i, 6))
  if parentKey and not adding[parentKey] and rcall("EXISTS", parentKey) ~= 1 then
    return {-5, i}
  end
  if rcall("EXISTS", jobKey) == 1 then
    local held = rcall("HGET", jobKey, "parentKey")
    if parentKey and held and held ~= parentKey
       and (adding[held] or rcall("EXISTS", held) == 1) then
      return {-7, i}
    end
  end
  adding[jobKey] = true
end

local results = {}
for i = 1, n do
  local maxEvents = getOrSetMaxEvents(KEYS[(i - 1) * 3 + 1])
  results[i] = addJob(arg(i, 0), maxEvents, arg(i, 1), arg(i, 2), arg(i, 3), arg(i, 4),
                      arg(i, 5), opt(arg(i, 6)), opt(arg(i, 7)), opt(arg(i, 8)),
                      opt(arg(i, 9)), arg(i, 10) == "1")
end
local takes = ARGV[2 + n * 11]
if takes then
  local taken = {}
  for i, take in ipairs(cjson.decode(takes)) do
    taken[i] = takeJobs(take["qk"], take["ts"], take, 1)
  end
  return {results, taken}
end
return results
