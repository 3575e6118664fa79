-- Give back a key on a node that keeps no queue for it: a
-- compare-and-delete. It serves what a lean try (see lean.go) set — the
-- key was free before the try set it, so freeing it again hands nothing
-- on to waiters — and the release of a lease on the nodes other than its
-- key's queue nodes, where no waiter queues (see release.lua, which the
-- queue nodes run). KEYS[1] the lock key, KEYS[2] the node's state (see
-- acquire.lua).
-- ARGV[1] the lock value, ARGV[2] what to do with the grant's record
-- (field KEYS[1] of KEYS[2]): '0' nothing (no restart quarantine), '1'
-- delete it (the try wrote it: HSETNX said so), '2' delete it only if
-- it names ARGV[1] (the try's HSETNX found another's record, or its
-- answer was not read: that record may be the only trace of a lock key
-- evicted behind Redlock's back, which the next full grant judges), '3'
-- as release.lua does: delete it with the key, and where the key is gone
-- only if it names ARGV[1],
-- ARGV[3] (optional) another value of ours the key may hold, or '' (see
-- release.lua's ARGV[9]).
-- Returns 1 when given back, 0 when the key was not ours.
local cur = redis.call('GET', KEYS[1])
local ours = cur and (cur == ARGV[1] or (ARGV[3] ~= nil and ARGV[3] ~= '' and cur == ARGV[3]))
if ours then
  redis.call('DEL', KEYS[1])
end
if (ARGV[2] == '1' or ARGV[2] == '3') and ours then
  redis.call('HDEL', KEYS[2], KEYS[1])
elseif ARGV[2] == '2' or ARGV[2] == '3' and not cur then
  local r = redis.call('HGET', KEYS[2], KEYS[1])
  if r and string.sub(r, -string.len(ARGV[1]) - 1) == ' ' .. ARGV[1] then
    redis.call('HDEL', KEYS[2], KEYS[1])
  end
end
if ours then
  return 1
end
return 0
