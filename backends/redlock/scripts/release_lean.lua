-- Release a key granted on the lean path (see lean.go): a compare-and-
-- delete, unless the key has waiters, whose hand-off release.lua does.
-- KEYS[1] the lock key, KEYS[2] its waiters (see acquire.lua), KEYS[3]
-- the node's state.
-- ARGV[1] the lock value, ARGV[2] what to do with the grant's record
-- (field KEYS[1] of KEYS[3]): '0' nothing (no restart quarantine), '1'
-- delete it (the grant wrote it: HSETNX said so), '2' delete it only if
-- it names ARGV[1] (the grant's HSETNX found another's record, or its
-- answer was not read: that record may be the only trace of a lock key
-- evicted behind Redlock's back, which the next full grant checks),
-- ARGV[3] '1': a holder's release, which must hand the key to its
-- waiters; '0': a lean try that gives back what it set (the key was free
-- before it: freeing it again hands nothing on).
-- A holder's release also sweeps one record of a lock that expired
-- without a release, as acquire.lua's grants do.
-- Returns 1 when released, 0 when the key was not ours, 3 (and does
-- nothing) when a holder's key has waiters: run release.lua instead.
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then
  return 3
end
local ours = redis.call('GET', KEYS[1]) == ARGV[1]
if ours then
  redis.call('DEL', KEYS[1])
end
if ARGV[2] == '1' and ours then
  redis.call('HDEL', KEYS[3], KEYS[1])
elseif ARGV[2] == '2' then
  local r = redis.call('HGET', KEYS[3], KEYS[1])
  if r and string.sub(r, -string.len(ARGV[1]) - 1) == ' ' .. ARGV[1] then
    redis.call('HDEL', KEYS[3], KEYS[1])
  end
end
if ARGV[3] == '1' and ARGV[2] ~= '0' then
  -- The sweep of one record of a lock that expired without a release,
  -- which acquire.lua does on the full path.
  local f = redis.call('HRANDFIELD', KEYS[3])
  if f and f ~= string.sub(KEYS[3], 1, -5) and f ~= KEYS[1] then
    local r = redis.call('HGET', KEYS[3], f)
    local t = redis.call('TIME')
    if r and tonumber(string.match(r, '^%d+')) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
      redis.call('HDEL', KEYS[3], f)
    end
  end
end
if ours then
  return 1
end
return 0
