-- Whether a node may vote: the restart quarantine, run on the node so
-- that what it reads and what it writes cannot be split by a restart.
-- KEYS[1] the node's state (hash; its field M is the marker, see
-- acquire.lua), KEYS[2] the record of a detected loss (hash: run, at, q,
-- prior).
-- ARGV[1] the quarantine (ms) the client asks for: the largest max TTL
-- it knows of; ARGV[2] '1' when the client has seen these nodes in use
-- (a node that still has a marker, of this process or another, was in
-- use whatever the client saw: the record says so, so that the verdict
-- does not depend on which client's probe detects the loss first);
-- ARGV[3] 'admit' to admit a node that has served its quarantine (a
-- client does so only once it has read the max TTLs recorded on the
-- nodes), 'look' not to.
-- Returns one of
--   'evicts <run_id> <policy>'                       the node may evict lock keys: not admitted
--   'admitted <run_id> <max TTL ms>'                 the marker admits this server process
--   'quarantined <run_id> <q ms> <left ms> <prior>'  a loss was detected; no vote for <left> more ms
--
-- The memory policy is read first: a node that may evict keys is not
-- admitted, whatever its marker says. The marker holds the run_id of the
-- process it admits and how many keys that process had evicted then: a
-- node that restarted (a new run_id, whatever data it reloaded), lost the
-- marker (restart without data, FLUSHALL, eviction) or evicted keys since
-- is not admitted. The first client to see that records when (on the
-- node's clock); the node is admitted once it has served the quarantine
-- since then.
local M = string.sub(KEYS[1], 1, -5) -- the key prefix: the node's state is its prefix .. 'node'
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local mem = redis.call('INFO', 'memory')
local limit = string.match(mem, 'maxmemory:(%d+)')
local policy = string.match(mem, 'maxmemory_policy:([%w%-]+)')
if limit ~= '0' and policy ~= 'noeviction' then
  return 'evicts ' .. run .. ' ' .. policy
end
local evicted = string.match(redis.call('INFO', 'stats'), 'evicted_keys:(%d+)')
local m = redis.call('HGET', KEYS[1], M)
if m and string.sub(m, 1, string.len(run) + 1) == run .. ' ' then
  local maxttl, ev = string.match(m, '^%x+ (%d+) (%d+)$')
  if ev == evicted then
    return 'admitted ' .. run .. ' ' .. maxttl
  end
  -- It evicted keys since it was admitted (or its statistics were
  -- reset): it may have lost locks. Out, as after a restart.
  redis.call('HDEL', KEYS[1], M)
end
local inuse = ARGV[2]
if m then
  inuse = '1'
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local want = tonumber(ARGV[1])
local l = redis.call('HMGET', KEYS[2], 'run', 'at', 'q', 'prior')
local at, q, prior = tonumber(l[2]), tonumber(l[3]), l[4]
if l[1] ~= run or not at or not q then
  at, q, prior = now, want, inuse
  redis.call('HSET', KEYS[2], 'run', run, 'at', at, 'q', q, 'prior', prior)
else
  if want > q then
    q = want
    redis.call('HSET', KEYS[2], 'q', q)
  end
  if inuse == '1' and prior ~= '1' then
    prior = '1'
    redis.call('HSET', KEYS[2], 'prior', prior)
  end
end
if now - at >= q and ARGV[3] == 'admit' then
  redis.call('HSET', KEYS[1], M, run .. ' ' .. q .. ' ' .. evicted)
  redis.call('DEL', KEYS[2])
  return 'admitted ' .. run .. ' ' .. q
end
return 'quarantined ' .. run .. ' ' .. q .. ' ' .. math.max(at + q - now, 0) .. ' ' .. prior
