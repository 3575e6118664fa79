-- Extend a Redlock key if it still holds our value.
-- KEYS[1] the lock key, KEYS[2] the node's state (see acquire.lua).
-- ARGV[1] the lock value, ARGV[2] the new TTL in ms, ARGV[3] '1': the
-- node records its grants (the restart quarantine).
-- Returns 1 when extended, 0 when the key is not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[3] == '1' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', KEYS[2], KEYS[1], (now + tonumber(ARGV[2])) .. ' ' .. ARGV[1])
end
return 1
