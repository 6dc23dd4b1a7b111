--[[
  Reading and raising fields another program may have written: a number field that
  is no finite number ("abc", "nan", "1e400") reads as nil, and a counter that is no
  integer restarts from 0, so one bad field fails neither its job's call nor, when
  that call is a take, every call of its queue.
]]

local function finiteNumber(value)
  local n = tonumber(value)
  if n and n == n and n ~= math.huge and n ~= -math.huge then return n end
end

-- A counter field of a hash (a job's ats, atm, stc...) raised by one. HINCRBY would
-- raise on a value that is no integer: a take would then fail on that job at the head
-- of wait again and again, holding up its whole queue.
local function raiseCounter(key, field)
  local n = redis.pcall("HINCRBY", key, field, 1)
  if type(n) == "table" then
    redis.call("HSET", key, field, 1)
    return 1
  end
  return n
end
