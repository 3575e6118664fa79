-- Whether a node may vote: the restart quarantine, run on the node so
-- that what it reads and what it writes cannot be split by a restart.
-- KEYS[1] the node marker ('<run_id> <max TTL ms>'), KEYS[2] the record
-- of a detected loss (hash: run, at, q, prior).
-- ARGV[1] the quarantine (ms) the client asks for: the largest max TTL
-- it knows of; ARGV[2] '1' when the client has seen these nodes in use;
-- ARGV[3] 'admit' to admit a node that has served its quarantine (a
-- client does so only after it has read the max TTLs recorded on every
-- node), 'look' not to.
-- Returns one of
--   'admitted <run_id> <max TTL ms>'            the marker admits this server process
--   'quarantined <run_id> <q ms> <left ms>'     a loss was detected; no vote for <left> more ms
--   'evicts <run_id> <policy>'                  the node may evict lock keys: never admitted
--
-- The marker holds the run_id of the process it admits: a node that
-- restarted (a new run_id, whatever data it reloaded) or lost the marker
-- (restart without data, FLUSHALL, eviction) is not admitted. The first
-- client to see that records when (on the node's clock); the node is
-- admitted once it has served the quarantine since then.
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local m = redis.call('GET', KEYS[1])
if m and string.sub(m, 1, string.len(run) + 1) == run .. ' ' then
  return 'admitted ' .. m
end
local mem = redis.call('INFO', 'memory')
local limit = string.match(mem, 'maxmemory:(%d+)')
local policy = string.match(mem, 'maxmemory_policy:([%w%-]+)')
if limit ~= '0' and policy ~= 'noeviction' then
  return 'evicts ' .. run .. ' ' .. policy
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local want = tonumber(ARGV[1])
local l = redis.call('HMGET', KEYS[2], 'run', 'at', 'q', 'prior')
local at, q = tonumber(l[2]), tonumber(l[3])
if l[1] ~= run or not at or not q then
  at, q = now, want
  redis.call('HSET', KEYS[2], 'run', run, 'at', at, 'q', q, 'prior', ARGV[2])
else
  if want > q then
    q = want
    redis.call('HSET', KEYS[2], 'q', q)
  end
  if ARGV[2] == '1' and l[4] ~= '1' then
    redis.call('HSET', KEYS[2], 'prior', '1')
  end
end
if now - at >= q and ARGV[3] == 'admit' then
  redis.call('SET', KEYS[1], run .. ' ' .. q)
  redis.call('DEL', KEYS[2])
  return 'admitted ' .. run .. ' ' .. q
end
return 'quarantined ' .. run .. ' ' .. q .. ' ' .. math.max(at + q - now, 0)
