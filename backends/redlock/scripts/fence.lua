-- fence advances a key's fencing counter (see fence.go) and returns the
-- token of a grant: the counter plus one, raised to at least floor (the
-- acquiring client's clock in µs, or 0). Every node of one grant gets the
-- same floor, so that they agree on the token. The counter outlives the
-- grant by life ms, for ever when life is '0'. It is the tail of the
-- acquire script and the lean grant's fencing script (advance.lua): both
-- are this file followed by theirs, so that a token means the same on
-- either path.
local function fence(counter, floor, life)
  local token = redis.call('INCR', counter)
  local f = tonumber(floor)
  if token < f then
    token = f
    if life ~= '0' then
      redis.call('SET', counter, floor, 'PX', life)
      return token
    end
    redis.call('SET', counter, floor)
  end
  if life ~= '0' then
    redis.call('PEXPIRE', counter, life)
  end
  return token
end
