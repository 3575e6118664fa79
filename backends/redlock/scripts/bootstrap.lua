-- Admit a brand-new node at once, without its quarantine, only if it has
-- never been in use: no state (marker, records of grants), no loss
-- recorded by a client that had seen these nodes in use; and, unless
-- forced, only if its server has been up for at least the max TTL and
-- never flushed, so that a node that restarted or was flushed while a
-- lock was held (and that no client has probed since) is not taken for
-- a new one.
-- KEYS[1] the node's state (hash; see acquire.lua), KEYS[2] the record of
-- a detected loss.
-- ARGV[1] 'check' (read only) or 'admit', ARGV[2] the least uptime (ms),
-- ARGV[3] '1': force (admit a young or flushed node), ARGV[4] the max TTL
-- (ms) to record on the marker (0: the clients that take leases record
-- theirs).
-- Returns 'free <run_id>' (check), 'admitted <run_id> <max TTL>' (admit),
-- 'in-use <run_id> <why>', 'evicts <run_id> <policy>',
-- 'young <run_id> <uptime s>' or 'flushed <run_id>'.
local M = string.sub(KEYS[1], 1, -5) -- the key prefix: the node's state is its prefix .. 'node'
local server = redis.call('INFO', 'server')
local run = string.match(server, 'run_id:(%x+)')
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 'in-use ' .. run .. ' marker'
end
if redis.call('HGET', KEYS[2], 'prior') == '1' then
  return 'in-use ' .. run .. ' loss'
end
local mem = redis.call('INFO', 'memory')
local limit = string.match(mem, 'maxmemory:(%d+)')
local policy = string.match(mem, 'maxmemory_policy:([%w%-]+)')
if limit ~= '0' and policy ~= 'noeviction' then
  return 'evicts ' .. run .. ' ' .. policy
end
if ARGV[3] ~= '1' then
  local up = tonumber(string.match(server, 'uptime_in_seconds:(%d+)'))
  if up * 1000 < tonumber(ARGV[2]) then
    return 'young ' .. run .. ' ' .. up
  end
  local cmds = redis.call('INFO', 'commandstats')
  if string.find(cmds, 'cmdstat_flushall:', 1, true) or string.find(cmds, 'cmdstat_flushdb:', 1, true) then
    return 'flushed ' .. run
  end
end
if ARGV[1] ~= 'admit' then
  return 'free ' .. run
end
local evicted = string.match(redis.call('INFO', 'stats'), 'evicted_keys:(%d+)')
redis.call('HSET', KEYS[1], M, run .. ' ' .. ARGV[4] .. ' ' .. evicted)
redis.call('DEL', KEYS[2])
return 'admitted ' .. run .. ' ' .. ARGV[4]
