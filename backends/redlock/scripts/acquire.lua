-- Acquire a Redlock key on one node.
-- KEYS[1] the lock key, KEYS[2] its fencing counter, KEYS[3] the node marker
-- ('<run_id> <max TTL ms>'), KEYS[4] the key's waiters (zset: waiter id ->
-- arrival), KEYS[5] their deadlines (zset: waiter id -> node time in ms).
-- ARGV[1] the lock value, ARGV[2] the TTL in ms,
-- ARGV[3] the run_id the client's connection found ('' without the restart quarantine),
-- ARGV[4] the client's max TTL in ms (recorded on the marker: the largest wins),
-- ARGV[5] '1': advance and return the fencing counter,
-- ARGV[6] a floor for the token (the client's clock in µs), or '0',
-- ARGV[7] how long (ms) the counter outlives the grant, '0' for ever,
-- ARGV[8] the waiter id ('' : do not queue), ARGV[9] its arrival,
-- ARGV[10] how long (ms) a waiter keeps its place without trying again,
-- ARGV[11] '1': queue the waiter even where it is granted (it has been
-- refused before: it is contending).
-- Returns -2 when the node does not admit this run (lost its data or
-- restarted: quarantine); when the key is held (or reserved for another
-- waiter), -10 - its remaining TTL in ms (-1 if it has none); else the
-- token (0 without fencing).
if ARGV[3] ~= '' then
  local m = redis.call('GET', KEYS[3])
  local n = string.len(ARGV[3])
  if not m or string.sub(m, 1, n + 1) ~= ARGV[3] .. ' ' then
    return -2
  end
  if (tonumber(string.sub(m, n + 2)) or 0) < tonumber(ARGV[4]) then
    redis.call('SET', KEYS[3], ARGV[3] .. ' ' .. ARGV[4])
  end
end
-- A waiter queues (or renews its place): the release that frees the key
-- reserves it for the waiter that arrived first and is still trying.
local function queue()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[4], 'NX', ARGV[9], ARGV[8])
  redis.call('ZADD', KEYS[5], now + tonumber(ARGV[10]), ARGV[8])
  redis.call('PEXPIRE', KEYS[4], ARGV[10])
  redis.call('PEXPIRE', KEYS[5], ARGV[10])
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Granted. A contending waiter stays queued (or queues) when granted,
  -- so that every node queues the same waiters: if its attempt fails elsewhere (a split
  -- vote), the key it gives back is reserved for the same first waiter on
  -- every node. Its release dequeues it.
  if ARGV[8] ~= '' and (ARGV[11] == '1' or redis.call('EXISTS', KEYS[4]) == 1) then
    queue()
  end
else
  -- Held, or reserved: for this waiter (claim it), or another (queue up).
  if ARGV[8] == '' or redis.call('GET', KEYS[1]) ~= 'reserved:' .. ARGV[8] then
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
end
if ARGV[5] ~= '1' then
  return 0
end
local token = redis.call('INCR', KEYS[2])
local floor = tonumber(ARGV[6])
if token < floor then
  -- Every node of one grant gets the same floor: they agree on the token.
  redis.call('SET', KEYS[2], ARGV[6])
  token = floor
end
if ARGV[7] ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
return token
