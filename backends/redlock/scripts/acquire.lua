-- Acquire a Redlock key on one node.
-- KEYS[1] the lock key, KEYS[2] its fencing counter, KEYS[3] the node marker
-- ARGV[1] the lock value, ARGV[2] the TTL in ms,
-- ARGV[3] "1": refuse (-2) when the node marker is missing (restart quarantine)
-- ARGV[4] "1": advance and return the fencing counter
-- ARGV[5] a floor for the token (the client's clock in µs), or "0"
-- Returns -2 quarantined, -1 held by another value, else the token (0 without fencing).
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[3]) == 0 then
  return -2
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return -1
end
if ARGV[4] ~= '1' then
  return 0
end
local token = redis.call('INCR', KEYS[2])
local floor = tonumber(ARGV[5])
if token < floor then
  -- Every node of one grant gets the same floor: they agree on the token.
  redis.call('SET', KEYS[2], ARGV[5])
  token = floor
end
return token
