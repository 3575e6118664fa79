-- Delete a Redlock key if it still holds our value, and hand the key on.
-- KEYS[1] the lock key, KEYS[2] its hand-off list;
-- ARGV[1] the lock value, ARGV[2] "1" to push a hand-off token,
-- ARGV[3] how long (ms) an unclaimed token lives.
-- Returns 1 when released, 0 when the key was not ours.
--
-- A waiter blocks in BLPOP on the hand-off list: the token wakes exactly
-- one waiter, the one that has waited longest. At most one token is kept.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] == '1' then
    redis.call('LPUSH', KEYS[2], '1')
    redis.call('LTRIM', KEYS[2], 0, 0)
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  return 1
end
return 0
