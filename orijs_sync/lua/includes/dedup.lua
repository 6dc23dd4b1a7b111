--[[
  Deduplication as BullMQ 5.81 keeps it: "de:<id>" names the job holding the
  id (with the ttl in ms, when given). Modes of the stored "de" option:
    extend            a duplicate add resets the ttl
    replace           a duplicate add replaces the job while it is delayed
    keepLastIfActive  a duplicate of an active job is kept in the hash
                      "dn:<id>" (the last one wins) and added when that job
                      finishes; the key then has no ttl
]]
--- @include "store_job"
--- @include "job_keys"

local function deduplicationTtl(de)
  local ttl = tonumber(de["ttl"])
  if ttl and ttl > 0 and not de["keepLastIfActive"] then return math.floor(ttl) end
end

-- Points the key at jobId, with the ttl (renewed) unless keepLastIfActive.
-- "NX" as the extra argument sets it only when free; returns false then.
local function holdDeduplicationKey(key, jobId, de, ...)
  local ttl = deduplicationTtl(de)
  if ttl then return rcall("SET", key, jobId, "PX", ttl, ...) end
  return rcall("SET", key, jobId, ...)
end

local function emitDeduplicated(qk, maxEvents, jobId, deduplicationId, duplicateId)
  local eventsKey = qk .. "events"
  rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "debounced",
        "jobId", jobId, "debounceId", deduplicationId)
  rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "deduplicated",
        "jobId", jobId, "deduplicationId", deduplicationId, "deduplicatedJobId", duplicateId)
end

-- keepLastIfActive and the holder active: keeps the duplicate (job, see storeNewJob)
-- in "dn:<id>" for when the holder finishes. Returns whether it did.
local function keepIfHolderActive(qk, maxEvents, job, de, held)
  if not de["keepLastIfActive"] or not rcall("LPOS", qk .. "active", held) then
    return false
  end
  local fields = {"name", job.name, "data", job.data, "opts", job.optsJson, "jid", job.id}
  for _, field in ipairs({{"pk", job.parentKey}, {"pd", job.parentJson},
                          {"pdk", job.parentDepsKey}, {"rjk", job.repeatJobKey}}) do
    if field[2] then
      table.insert(fields, field[1]); table.insert(fields, field[2])
    end
  end
  local nextKey = qk .. "dn:" .. de["id"]
  rcall("DEL", nextKey)
  rcall("HSET", nextKey, unpack(fields))
  rcall("PERSIST", qk .. "de:" .. de["id"])   -- held until the active job ends
  emitDeduplicated(qk, maxEvents, held, de["id"], job.id)
  return true
end

-- replace: a holder still delayed is removed and the new job added in its place
-- (nil); else the holder's id (a duplicate of an active one kept, as above).
local function deduplicateReplacing(qk, maxEvents, job, de, key)
  local held = rcall("GET", key)
  if not held then
    holdDeduplicationKey(key, job.id, de)
    return nil
  end
  if rcall("ZREM", qk .. "delayed", held) == 0 then
    keepIfHolderActive(qk, maxEvents, job, de, held)
    return held
  end
  removeJobKeys(qk .. held)
  rcall("XADD", qk .. "events", "*", "event", "removed", "jobId", held, "prev", "delayed")
  emitDeduplicated(qk, maxEvents, job.id, de["id"], held)
  if deduplicationTtl(de) and not de["extend"] then
    rcall("SET", key, job.id, "KEEPTTL")
  else
    holdDeduplicationKey(key, job.id, de)
  end
  return nil
end

-- Without replace: the holder's id when the key is held (the ttl renewed with
-- extend), else nil (the key now names the new job).
local function deduplicateKeeping(qk, maxEvents, job, de, key)
  local held
  if de["extend"] and tonumber(de["ttl"]) and tonumber(de["ttl"]) > 0 then
    held = rcall("GET", key)
    if not held then
      holdDeduplicationKey(key, job.id, de)
      return nil
    end
    if keepIfHolderActive(qk, maxEvents, job, de, held) then return held end
    holdDeduplicationKey(key, held, de)
  else
    if holdDeduplicationKey(key, job.id, de, "NX") then return nil end
    held = rcall("GET", key)
    if keepIfHolderActive(qk, maxEvents, job, de, held) then return held end
  end
  emitDeduplicated(qk, maxEvents, held, de["id"], job.id)
  return held
end

-- For a job about to be added (see storeNewJob): the id of the job that holds its
-- deduplication id (nothing is added then), or nil to add it. replaceAllowed: false
-- for a flow parent, which BullMQ never replaces.
local function deduplicateJob(qk, maxEvents, job, replaceAllowed)
  local de = job.opts["de"]
  if type(de) ~= "table" or not de["id"] then return nil end
  local key = qk .. "de:" .. de["id"]
  if de["replace"] and replaceAllowed then
    return deduplicateReplacing(qk, maxEvents, job, de, key)
  end
  return deduplicateKeeping(qk, maxEvents, job, de, key)
end

-- The duplicate kept by keepLastIfActive, added now (the job holding the id has
-- finished) with the id its own add was given, and holding the id in turn. A kept
-- hash another program left unreadable (no name, data or JSON object opts) is
-- dropped: it never makes the finishing call fail.
local function addKeptDuplicate(qk, deduplicationId, timestamp)
  local nextKey = qk .. "dn:" .. deduplicationId
  if rcall("EXISTS", nextKey) ~= 1 then return end
  local kept = rcall("HMGET", nextKey, "name", "data", "opts", "pk", "pd", "pdk", "rjk", "jid")
  local readable, opts = pcall(cjson.decode, kept[3] or "")
  if not (kept[1] and kept[2] and readable and type(opts) == "table") then
    rcall("DEL", nextKey)
    return
  end
  local counter = rcall("INCR", qk .. "id")     -- always, as BullMQ: ids stay monotonic
  local job = {id = kept[8] or tostring(counter), name = kept[1], data = kept[2],
               optsJson = kept[3], opts = opts, timestamp = timestamp,
               parentKey = kept[4] or nil, parentJson = kept[5] or nil,
               parentDepsKey = kept[6] or nil, repeatJobKey = kept[7] or nil}
  local de = job.opts["de"]
  holdDeduplicationKey(qk .. "de:" .. deduplicationId, job.id, type(de) == "table" and de or {})
  storeNewJob(qk, getOrSetMaxEvents(qk .. "meta"), job)
  rcall("DEL", nextKey)
end

-- A job with a deduplication id finished (completed or failed for good): the key
-- is freed when it names the job and has no ttl left running, and a duplicate
-- kept while it was active is added.
local function finishDeduplicated(qk, jobId, deduplicationId, timestamp)
  local key = qk .. "de:" .. deduplicationId
  local pttl = rcall("PTTL", key)
  if pttl == 0 or (pttl == -1 and rcall("GET", key) == jobId) then
    rcall("DEL", key)
  end
  addKeptDuplicate(qk, deduplicationId, timestamp)
end
