-- Raise a fencing counter to at least a token granted elsewhere, so that
-- a majority of nodes knows the token and every later grant exceeds it.
-- KEYS[1] the counter; ARGV[1] the token, ARGV[2] how long (ms) the
-- counter lives on, '0' for ever. Returns 1.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
if ARGV[2] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
