--[[
  Per-minute counts of finished jobs, kept in BullMQ's metrics keys so that its
  getMetrics() reads them:
    {qk}metrics:{target}       hash: count (all finished so far), prevTS (ms of
                               the last point written), prevCount (count then)
    {qk}metrics:{target}:data  list: jobs finished per minute, newest first,
                               at most maxPoints long
  A point is written when a job finishes in a later minute than prevTS: the
  jobs counted since then, followed by a zero for each minute without any.
]]
local function recordMetric(metaKey, maxPoints, timestamp)
  local dataKey = metaKey .. ":data"
  local before = rcall("HINCRBY", metaKey, "count", 1) - 1
  local prevTS = rcall("HGET", metaKey, "prevTS")
  if not prevTS then
    rcall("HSET", metaKey, "prevTS", timestamp, "prevCount", 0)
    return
  end
  local minutes = math.min(math.floor(tonumber(timestamp) / 60000)
                           - math.floor(tonumber(prevTS) / 60000), maxPoints)
  if minutes <= 0 then return end
  rcall("LPUSH", dataKey, before - tonumber(rcall("HGET", metaKey, "prevCount")))
  local zeros = minutes - 1
  while zeros > 0 do
    local chunk = {}
    for i = 1, math.min(zeros, 5000) do chunk[i] = 0 end
    rcall("LPUSH", dataKey, unpack(chunk))
    zeros = zeros - #chunk
  end
  rcall("LTRIM", dataKey, 0, maxPoints - 1)
  rcall("HSET", metaKey, "prevCount", before, "prevTS", timestamp)
end
