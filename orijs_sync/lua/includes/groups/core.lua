--[[
  Shared helpers of the group queue scripts (GroupMQ 1.1's Redis layout).

  ns is "groupmq:{namespace}". Keys used, all under ns:
    job:{id} (hash)  g:{gid} (zset of waiting ids by score)  g:{gid}:active (list:
    the one job of the group being processed)  ready (zset of groups by head score)
    groups (set)  processing (zset id -> deadline)  processing:{id} (hash groupId,
    deadlineAt, token)  delayed (zset id -> run at)  completed / failed (zsets)
    unique:{id}  seq:{day}  stage (zset id -> release at)  stage:timer
  A job's hash has status waiting | delayed | staged | processing | completed | failed.
]]
--- @include "stored"

-- The fields read for a job about to be reserved: its reply (see gmReply), then status.
local GM_FIELDS = {"id", "groupId", "data", "attempts", "maxAttempts", "seq", "timestamp",
                   "orderMs", "score", "status"}

-- The score a job goes back into its group with (it was the group's head when it was
-- reserved); a score that is no number puts it back at the front.
local function gmScore(jobKey)
  return finiteNumber(rcall("HGET", jobKey, "score")) or 0
end

-- The reply for one reserved job: id, groupId, data, attempts, maxAttempts, seq,
-- timestamp, orderMs, score, deadline (the order GroupMQ returns them in).
local function gmReply(fields, deadline)
  local out = {}
  for i = 1, 9 do out[i] = fields[i] or "" end
  out[10] = tostring(deadline)
  return out
end

-- Make jobId (its GM_FIELDS read) the group's active job: active list, processing
-- set and hash (with the reserving worker's token), status.
local function gmActivate(ns, gid, jobId, fields, now, vt, token)
  local deadline = now + vt
  rcall("LPUSH", ns .. ":g:" .. gid .. ":active", jobId)
  rcall("HSET", ns .. ":job:" .. jobId, "status", "processing")
  rcall("HSET", ns .. ":processing:" .. jobId, "groupId", gid,
        "deadlineAt", tostring(deadline), "token", token)
  rcall("ZADD", ns .. ":processing", deadline, jobId)
  return gmReply(fields, deadline)
end

-- Drop a group that holds no waiting job (GroupMQ's empty-group cleanup).
local function gmDropIfEmpty(ns, gid)
  local gZ = ns .. ":g:" .. gid
  if rcall("ZCARD", gZ) > 0 then return false end
  rcall("DEL", gZ)
  rcall("ZREM", ns .. ":ready", gid)
  if rcall("LLEN", gZ .. ":active") == 0 then
    rcall("SREM", ns .. ":groups", gid)
  end
  return true
end

-- Put the group in ready at its head's score when its head can run now
-- (not delayed); else take it out (promotion or completion puts it back).
local function gmReadyHead(ns, gid)
  if gmDropIfEmpty(ns, gid) then return end
  local head = rcall("ZRANGE", ns .. ":g:" .. gid, 0, 0, "WITHSCORES")
  if rcall("HGET", ns .. ":job:" .. head[1], "status") == "delayed" then
    rcall("ZREM", ns .. ":ready", gid)
  else
    rcall("ZADD", ns .. ":ready", head[2], gid)
  end
end

-- Is the group's active slot taken? An active id no longer in the processing set
-- is an orphan (GroupMQ's inline expiry recovery frees the job but not the slot):
-- it is cleared, so the group is not blocked forever.
local function gmBusy(ns, gid)
  local activeKey = ns .. ":g:" .. gid .. ":active"
  for _, activeId in ipairs(rcall("LRANGE", activeKey, 0, -1)) do
    if rcall("ZSCORE", ns .. ":processing", activeId) then return true end
    rcall("LREM", activeKey, 0, activeId)
  end
  return false
end

-- Take the head job of a free group. Returns the job's reply, or nil when the
-- group is busy, empty or its head is delayed (the group then leaves ready:
-- whatever frees, fills or promotes it puts it back).
local function gmTakeHead(ns, gid, now, vt, token)
  local gZ = ns .. ":g:" .. gid
  if gmBusy(ns, gid) then
    rcall("ZREM", ns .. ":ready", gid)
    return nil
  end
  while true do
    local head = rcall("ZPOPMIN", gZ)
    if #head == 0 then
      gmDropIfEmpty(ns, gid)
      return nil
    end
    local fields = rcall("HMGET", ns .. ":job:" .. head[1], unpack(GM_FIELDS))
    if fields[10] == "delayed" then
      rcall("ZADD", gZ, head[2], head[1])
      rcall("ZREM", ns .. ":ready", gid)
      return nil
    end
    if fields[1] or fields[10] then
      rcall("ZREM", ns .. ":ready", gid)
      return gmActivate(ns, gid, head[1], fields, now, vt, token)
    end
    -- a dangling id whose hash is gone: dropped; look at the next one
  end
end

-- The job is ours to finish: its processing hash still holds the token of the run
-- finishing it (each reservation has its own; every recovery, removal or finish
-- deletes that hash, and a reservation by GroupMQ's own workers writes none, so a
-- late finish after the job was handed to another worker, or to a later run on the
-- same worker, is refused). Releases it from processing and its group's active slot.
local function gmRelease(ns, jobId, gid, token)
  local procKey = ns .. ":processing:" .. jobId
  if rcall("HGET", procKey, "token") ~= token then
    return false
  end
  rcall("DEL", procKey)
  rcall("ZREM", ns .. ":processing", jobId)
  rcall("LREM", ns .. ":g:" .. gid .. ":active", 1, jobId)
  return true
end

-- Keep at most `keep` ids in a retention zset, deleting the oldest jobs.
local function gmTrim(ns, setKey, keep)
  local extra = rcall("ZCARD", setKey) - keep
  if extra <= 0 then return end
  local old = rcall("ZRANGE", setKey, 0, extra - 1)
  rcall("ZREMRANGEBYRANK", setKey, 0, extra - 1)
  for _, id in ipairs(old) do
    rcall("DEL", ns .. ":job:" .. id, ns .. ":unique:" .. id)
  end
end

-- Record a finished job as GroupMQ's workers do: kept in completed/failed with
-- its metadata when retention asks for it, else deleted with its unique key.
local function gmRecordFinished(ns, jobId, status, finishedOn, keep, fields)
  local jobKey = ns .. ":job:" .. jobId
  if keep > 0 then
    rcall("HSET", jobKey, "status", status, unpack(fields))
    rcall("ZADD", ns .. ":" .. status, finishedOn, jobId)
    if status == "completed" then gmTrim(ns, ns .. ":completed", keep) end
  else
    rcall("DEL", jobKey, ns .. ":unique:" .. jobId)
  end
end
