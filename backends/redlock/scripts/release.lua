-- Delete a Redlock key if it still holds our value, and wake the waiters.
-- KEYS[1] the lock key; ARGV[1] the lock value, ARGV[2] the release channel.
-- Returns 1 when released, 0 when the key was not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '')
  return 1
end
return 0
