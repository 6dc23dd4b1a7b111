--[[
  Raising a counter field of a hash (a job's ats, atm, stc...) by one. A value
  another program wrote that is not an integer ("", "abc", "1e400") would make
  HINCRBY raise and fail the whole call: a take would then fail on that job at
  the head of wait again and again, holding up its whole queue. The counter
  restarts from 0 instead.
]]

local function raiseCounter(key, field)
  local n = redis.pcall("HINCRBY", key, field, 1)
  if type(n) == "table" then
    redis.call("HSET", key, field, 1)
    return 1
  end
  return n
end
