-- Delete a Redlock key if it still holds our value (or a reservation for
-- us), or hand it to the waiter that has waited longest.
-- KEYS[1] the lock key, KEYS[2] its waiters, KEYS[3] their deadlines,
-- KEYS[4] the node's state, KEYS[5] what the waiters ask for (see
-- acquire.lua).
-- ARGV[1] the lock value, ARGV[2] our waiter id ('' to keep our place),
-- ARGV[3] '1': push a wake-up on the next waiter's list,
-- ARGV[4] how long (ms) the key stays reserved for the next waiter when
-- it cannot be handed to it,
-- ARGV[5] the prefix of waiters' wake-up lists, ARGV[6] their lifetime (ms),
-- ARGV[7] '1': the node records its grants (the restart quarantine),
-- ARGV[8] the run_id the releasing client knows this node by ('' without
-- the restart quarantine): the key is handed over only if the node's
-- marker names it (the node votes),
-- ARGV[9] another value of ours the key may hold, or '': the hand-off
-- value of the Acquire the lease came from (a hand-off it did not claim
-- here), or of a waiter that gives up.
-- ARGV[10] how many records to sweep ('0': none): look at that many
-- records of the node's state picked at random, and delete those of locks
-- that expired without a release (the lease was granted on the lean path,
-- which does not sweep; see acquire.lua's sweep, which looks at one per
-- grant). The client asks for a sweep of several in a few of its releases
-- rather than one in each: the records looked at are as many, the
-- commands that look fewer.
-- Returns 1 when released, 2 when released and reserved or handed to the
-- next waiter, 0 when the key was not ours.
--
-- The next waiter is the one that arrived first among those whose
-- deadline has not passed. The key is handed to it: its value becomes
-- the hand-off value of the waiter's Acquire, with the waiter's TTL, as
-- if the waiter's last try here had been granted now; and its wake-up
-- list gets the key's name, the value released (the same on every node
-- of one release, so that a waiter counts each node once per release),
-- the hand-off value, the value of that try and the
-- run_id, separated by NUL bytes. A waiter that learns of the hand-off
-- from a majority holds the key from then on without asking; one that
-- does not claims it with its next try. Where that cannot be done (the
-- marker does not name ARGV[8], or the waiter's try is not known), the
-- key is only reserved for the waiter (every other client is refused)
-- until it claims it or the reservation expires.
local records = ARGV[7] == '1'
if records and ARGV[10] ~= '0' then
  local picked = redis.call('HRANDFIELD', KEYS[4], ARGV[10], 'WITHVALUES')
  local marker = string.sub(KEYS[4], 1, -5)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local expired = {}
  for i = 1, #picked, 2 do
    local f = picked[i]
    local expiry = tonumber(string.match(picked[i + 1], '^%d+'))
    if f ~= marker and f ~= KEYS[1] and expiry and expiry <= now then
      expired[#expired + 1] = f
    end
  end
  if #expired > 0 then
    redis.call('HDEL', KEYS[4], unpack(expired))
  end
end
local cur = redis.call('GET', KEYS[1])
local ours = cur and (cur == ARGV[1] or cur == ARGV[9] or (ARGV[2] ~= '' and cur == 'reserved:' .. ARGV[2]))
if records and not cur then
  -- Gone (expired, or lost): forget our grant's record.
  local r = redis.call('HGET', KEYS[4], KEYS[1])
  if r and string.sub(r, -string.len(ARGV[1]) - 1) == ' ' .. ARGV[1] then
    redis.call('HDEL', KEYS[4], KEYS[1])
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  -- No waiters (Redis deletes a sorted set with its last member), so no
  -- waiter's ask either: acquire.lua's queue writes both, with the same
  -- expiry, and every script that dequeues a waiter deletes both. EXISTS,
  -- not ZRANGE: the uncontended release costs the node less.
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
  redis.call('HDEL', KEYS[5], ARGV[2])
end
if not ours then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local votes = ARGV[8] == ''
if not votes then
  local m = redis.call('HGET', KEYS[4], string.sub(KEYS[4], 1, -5))
  votes = m ~= false and string.sub(m, 1, string.len(ARGV[8]) + 1) == ARGV[8] .. ' '
end
while true do
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not head then
    break
  end
  local deadline = tonumber(redis.call('ZSCORE', KEYS[3], head) or '0')
  if deadline > now then
    local reg = redis.call('HGET', KEYS[5], head)
    local ttl, handed, try
    if reg and votes then
      ttl, handed, try = string.match(reg, '^(%d+) (%S+) (.*)$')
    end
    local value, life, wake
    if try then
      -- Handed over: the waiter holds it as if its try had been granted now.
      value, life = handed, tonumber(ttl)
      wake = KEYS[1] .. '\0' .. ARGV[1] .. '\0' .. handed .. '\0' .. try .. '\0' .. ARGV[8]
    else
      value, life = 'reserved:' .. head, tonumber(ARGV[4])
      wake = KEYS[1] .. '\0' .. ARGV[1] .. '\0\0\0'
    end
    -- It keeps its place (if a try of its fails elsewhere, the key it
    -- gives back here comes back to it) until its release, if it learns
    -- of the hand-off or claims the key in time; else it loses it.
    redis.call('ZADD', KEYS[3], 'XX', 'LT', now + tonumber(ARGV[4]), head)
    redis.call('SET', KEYS[1], value, 'PX', life)
    if records then
      redis.call('HSET', KEYS[4], KEYS[1], (now + life) .. ' ' .. value)
    end
    if ARGV[3] == '1' then
      local list = ARGV[5] .. head
      redis.call('RPUSH', list, wake)
      redis.call('LTRIM', list, -16, -1)
      redis.call('PEXPIRE', list, ARGV[6])
    end
    return 2
  end
  redis.call('ZREM', KEYS[2], head)
  redis.call('ZREM', KEYS[3], head)
  redis.call('HDEL', KEYS[5], head)
end
redis.call('DEL', KEYS[1])
if records then
  redis.call('HDEL', KEYS[4], KEYS[1])
end
return 1
