-- Delete a Redlock key if it still holds our value (or a reservation for
-- us), or hand it to the waiter that has waited longest.
-- KEYS[1] the lock key, KEYS[2] its waiters, KEYS[3] their deadlines,
-- KEYS[4] the node's state (see acquire.lua).
-- ARGV[1] the lock value, ARGV[2] our waiter id ('' to keep our place),
-- ARGV[3] '1': push a wake-up on the next waiter's list,
-- ARGV[4] how long (ms) the key stays reserved for the next waiter,
-- ARGV[5] the prefix of waiters' wake-up lists, ARGV[6] their lifetime (ms),
-- ARGV[7] '1': the node records its grants (the restart quarantine).
-- Returns 1 when released, 2 when released and reserved for the next
-- waiter, 0 when the key was not ours.
--
-- The next waiter is the one that arrived first among those whose
-- deadline has not passed; the key is reserved for it (every other
-- client is refused) until it claims it or the reservation expires, and
-- its wake-up list gets the key's name and, after a NUL byte, the value
-- released (the same on every node of one release, so that a waiter woken
-- by several nodes counts one wake-up).
local records = ARGV[7] == '1'
local cur = redis.call('GET', KEYS[1])
local ours = cur and (cur == ARGV[1] or (ARGV[2] ~= '' and cur == 'reserved:' .. ARGV[2]))
if records and not cur then
  -- Gone (expired, or lost): forget our grant's record.
  local r = redis.call('HGET', KEYS[4], KEYS[1])
  if r and string.sub(r, -string.len(ARGV[1]) - 1) == ' ' .. ARGV[1] then
    redis.call('HDEL', KEYS[4], KEYS[1])
  end
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if not head then
  if ours then
    redis.call('DEL', KEYS[1])
    if records then
      redis.call('HDEL', KEYS[4], KEYS[1])
    end
    return 1
  end
  return 0
end
if ARGV[2] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
end
if not ours then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not head then
    break
  end
  local deadline = tonumber(redis.call('ZSCORE', KEYS[3], head) or '0')
  if deadline > now then
    local value = 'reserved:' .. head
    redis.call('SET', KEYS[1], value, 'PX', ARGV[4])
    if records then
      redis.call('HSET', KEYS[4], KEYS[1], (now + tonumber(ARGV[4])) .. ' ' .. value)
    end
    -- It must claim the key in time, or lose its place.
    redis.call('ZADD', KEYS[3], 'XX', 'LT', now + tonumber(ARGV[4]), head)
    if ARGV[3] == '1' then
      local list = ARGV[5] .. head
      redis.call('RPUSH', list, KEYS[1] .. '\0' .. ARGV[1])
      redis.call('LTRIM', list, -16, -1)
      redis.call('PEXPIRE', list, ARGV[6])
    end
    return 2
  end
  redis.call('ZREM', KEYS[2], head)
  redis.call('ZREM', KEYS[3], head)
end
redis.call('DEL', KEYS[1])
if records then
  redis.call('HDEL', KEYS[4], KEYS[1])
end
return 1
