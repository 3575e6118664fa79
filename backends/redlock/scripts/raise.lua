-- Raise a fencing counter to at least a token granted elsewhere, so that
-- a majority of nodes knows the token and every later grant exceeds it.
-- KEYS[1] the counter; ARGV[1] the token. Returns 1.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
