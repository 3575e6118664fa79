package compose

import "os"

// Programs are the programs an Env runs on this machine and what they
// need: one field per server kind's binary or account, and the C compiler
// of the clock preload. A server placed on a host may name a binary of
// its own there (Placement.Binary); where it does not, the same name is
// used on the host.
type Programs struct {
	// RedisServer is the redis-server binary (Redis and Sentinel sets).
	RedisServer string
	// RedisSentinel is the redis-sentinel binary.
	RedisSentinel string
	// CC is the C compiler that builds the clock preload, on each host
	// where a server runs under it.
	CC string
}

// The environment variables DefaultPrograms reads, one per field of
// Programs. A classpath is a list of paths (os.PathListSeparator).
const (
	RedisServerEnv   = "LOCKBENCH_REDIS_SERVER"
	RedisSentinelEnv = "LOCKBENCH_REDIS_SENTINEL"
	CCEnv            = "LOCKBENCH_CC"
)

// DefaultPrograms returns Debian's programs (the ones make deps
// installs), each replaced by its environment variable when that is set:
// New gives every Env these.
func DefaultPrograms() Programs {
	p := Programs{
		RedisServer:   "redis-server",
		RedisSentinel: "redis-sentinel",
		CC:            "gcc",
	}
	for env, field := range map[string]*string{
		RedisServerEnv: &p.RedisServer, RedisSentinelEnv: &p.RedisSentinel,
		CCEnv: &p.CC,
	} {
		if v := os.Getenv(env); v != "" {
			*field = v
		}
	}
	return p
}
