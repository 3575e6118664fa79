-- Extend a Redlock key if it still holds our value.
-- KEYS[1] the lock key; ARGV[1] the lock value, ARGV[2] the new TTL in ms.
-- Returns 1 when extended, 0 when the key is not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
