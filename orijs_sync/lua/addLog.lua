--[[
  Appends a line to a job's logs, keeping at most ARGV[2] lines (0 = all).
  KEYS[1] job key   KEYS[2] logs list
  ARGV[1] line      ARGV[2] keep
  Returns the number of lines, or -1 (missing job).
]]
local rcall = redis.call
if rcall("EXISTS", KEYS[1]) ~= 1 then return -1 end
local count = rcall("RPUSH", KEYS[2], ARGV[1])
local keep = tonumber(ARGV[2]) or 0
if keep > 0 then
  rcall("LTRIM", KEYS[2], -keep, -1)
  return math.min(count, keep)
end
return count
