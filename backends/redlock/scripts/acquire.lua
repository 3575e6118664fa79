-- Acquire a Redlock key on one node. fence.lua precedes this file.
-- KEYS[1] the lock key, KEYS[2] its fencing counter, KEYS[3] the node's
-- state (hash: the marker, and a record of each lock granted here),
-- KEYS[4] the key's waiters (zset: waiter id -> arrival), KEYS[5] their
-- deadlines (zset: waiter id -> node time in ms), KEYS[6] what each
-- waiter asks for (hash: waiter id -> '<TTL ms> <its Acquire's hand-off
-- value> <the value of its last try here>': a release hands the key over
-- with them; see release.lua).
-- ARGV[1] the lock value, ARGV[2] the TTL in ms,
-- ARGV[3] the run_id the client's connection found ('' without the restart quarantine),
-- ARGV[4] the client's max TTL in ms (recorded on the marker: the largest wins),
-- ARGV[5] '1': advance and return the fencing counter,
-- ARGV[6] a floor for the token (the client's clock in µs), or '0',
-- ARGV[7] how long (ms) the counter outlives the grant, '0' for ever,
-- ARGV[8] the waiter id ('' : do not queue), ARGV[9] its arrival,
-- ARGV[10] how long (ms) a waiter keeps its place without trying again,
-- ARGV[11] '1': queue the waiter even where it is granted (it has been
-- refused before: it is contending),
-- ARGV[12] the value a release that hands the key to this Acquire sets
-- ('handed:' and a random value of its own; '' when it does not queue),
-- ARGV[13] '1': take the key whatever value it has here — a majority
-- holds the key for this Acquire (a key handed to it, or one its try was
-- granted), so any other value here is no live grant's (a release on its
-- way, a try that fails); see spread.go.
-- Returns -2 when the node does not admit this run (it lost its data,
-- restarted or evicted keys: quarantine); when the key is held (or
-- reserved or handed to another waiter), -10 - its remaining TTL in ms (-1 if it
-- has none); else the token (0 without fencing).
--
-- The marker (field M of KEYS[3]) is '<run_id> <max TTL ms> <evicted>':
-- the server process admitted, the largest max TTL of its clients, and
-- how many keys the process had evicted when it was admitted. Beside it,
-- with the restart quarantine, KEYS[3] records each lock granted here:
-- field <lock key> = '<expiry, node ms> <value>'. A lock key that is gone
-- while its record says it should be there was deleted behind Redlock's
-- back: if the node evicted keys since its admission, that is how, and
-- the node leaves the quorum (its marker goes) before it grants the key
-- again to someone else.
local M = string.sub(KEYS[3], 1, -5) -- the key prefix: the node's state is its prefix .. 'node'
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
local evicted
if ARGV[3] ~= '' then
  local m = redis.call('HGET', KEYS[3], M)
  local n = string.len(ARGV[3])
  if not m or string.sub(m, 1, n + 1) ~= ARGV[3] .. ' ' then
    return -2
  end
  local maxttl, ev = string.match(m, '^%x+ (%d+) (%d+)$')
  if not ev then
    return -2
  end
  if tonumber(maxttl) < tonumber(ARGV[4]) then
    redis.call('HSET', KEYS[3], M, ARGV[3] .. ' ' .. ARGV[4] .. ' ' .. ev)
  end
  evicted = ev
end
-- The record of this grant, and the sweep of one record of a lock that
-- expired without a release.
local function record()
  if not evicted then
    return
  end
  redis.call('HSET', KEYS[3], KEYS[1], (clock() + tonumber(ARGV[2])) .. ' ' .. ARGV[1])
  local f = redis.call('HRANDFIELD', KEYS[3])
  if f and f ~= M and f ~= KEYS[1] then
    local r = redis.call('HGET', KEYS[3], f)
    if r and tonumber(string.match(r, '^%d+')) <= clock() then
      redis.call('HDEL', KEYS[3], f)
    end
  end
end
-- A waiter queues (or renews its place): the release that frees the key
-- reserves it for the waiter that arrived first and is still trying.
local function queue()
  redis.call('ZADD', KEYS[4], 'NX', ARGV[9], ARGV[8])
  redis.call('ZADD', KEYS[5], clock() + tonumber(ARGV[10]), ARGV[8])
  redis.call('HSET', KEYS[6], ARGV[8], ARGV[2] .. ' ' .. ARGV[12] .. ' ' .. ARGV[1])
  redis.call('PEXPIRE', KEYS[4], ARGV[10])
  redis.call('PEXPIRE', KEYS[5], ARGV[10])
  redis.call('PEXPIRE', KEYS[6], ARGV[10])
end
-- Whether the key, held with value cur, was reserved for this waiter or
-- handed to its Acquire.
local function ours(cur)
  return ARGV[8] ~= '' and (cur == 'reserved:' .. ARGV[8] or cur == ARGV[12])
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if evicted then
    local r = redis.call('HGET', KEYS[3], KEYS[1])
    if r and tonumber(string.match(r, '^%d+')) > clock() then
      local ev = string.match(redis.call('INFO', 'stats'), 'evicted_keys:(%d+)')
      if ev ~= evicted then
        redis.call('DEL', KEYS[1])
        redis.call('HDEL', KEYS[3], M)
        return -2
      end
    end
  end
  record()
  -- Granted. A contending waiter stays queued (or queues) when granted,
  -- so that every node queues the same waiters: if its attempt fails elsewhere (a split
  -- vote), the key it gives back is reserved for the same first waiter on
  -- every node. Its release dequeues it.
  if ARGV[8] ~= '' and (ARGV[11] == '1' or redis.call('EXISTS', KEYS[4]) == 1) then
    queue()
  end
else
  -- Held, or reserved or handed: to this waiter (claim it: it did not
  -- learn of the hand-off from a majority), or another (queue up); or
  -- taken (ARGV[13]).
  if ARGV[13] ~= '1' and not ours(redis.call('GET', KEYS[1])) then
    if ARGV[8] ~= '' then
      queue()
    end
    local left = redis.call('PTTL', KEYS[1])
    if left < 0 then
      return -1
    end
    return -10 - left
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  record()
end
if ARGV[5] ~= '1' then
  return 0
end
return fence(KEYS[2], ARGV[6], ARGV[7])
