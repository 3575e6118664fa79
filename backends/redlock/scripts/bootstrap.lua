-- Admit a brand-new node at once, without its quarantine, only if it has
-- never been in use: no marker, and no loss recorded by a client that had
-- seen these nodes in use.
-- KEYS[1] the node marker, KEYS[2] the record of a detected loss.
-- ARGV[1] 'check' (read only) or 'admit'.
-- Returns 'free <run_id>' (check), 'admitted <run_id> 0' (admit),
-- 'in-use <run_id> <why>' or 'evicts <run_id> <policy>'.
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
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
if ARGV[1] ~= 'admit' then
  return 'free ' .. run
end
redis.call('SET', KEYS[1], run .. ' 0')
redis.call('DEL', KEYS[2])
return 'admitted ' .. run .. ' 0'
