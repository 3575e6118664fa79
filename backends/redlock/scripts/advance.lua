-- Advance a fencing counter for a grant of the lean path (see lean.go),
-- after its SET, with the clock floor (without it, the lean grant runs
-- INCR instead): fence.lua precedes this file.
-- KEYS[1] the key's fencing counter; ARGV[1] the floor for the token (the
-- client's clock in µs), or '0'; ARGV[2] how long (ms) the counter
-- outlives the grant, '0' for ever. Returns the token. It runs whether or
-- not the SET set the key: a counter advanced for no grant leaves a gap
-- between tokens, which fencing allows, and never lowers one.
return fence(KEYS[1], ARGV[1], ARGV[2])
