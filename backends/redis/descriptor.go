package redis

import (
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

func init() {
	backends.Register(backends.Descriptor{
		Name:    "redis",
		Doc:     "single-instance Redis: SET NX PX with a per-key fencing counter, safe while its one server runs and keeps its data",
		Open:    Open,
		Servers: backends.Servers{Kind: backends.Redis, Count: 1},
		// lockbench's Redlock on one node: TTL − (TTL×drift + 2 ms), its
		// default drift, from the start of the attempt that won.
		Contract: func(time.Duration, map[string]string) (locker.Info, error) {
			return locker.Info{DriftRate: redlock.DefaultDrift, Drift: 2 * time.Millisecond}, nil
		},
		Probe: Probe,
		Endpoints: backends.Endpoints{
			Flag:  "redis",
			Usage: "the single Redis server of the redis backend (host:port)",
			Auth:  Auth,
		},
	})
}

// Auth is the credential flags of every backend whose servers are Redis
// (this one, sentinel, redlock, redsync, rueidislock): ACL user, password
// and TLS, given once for all of them.
var Auth = backends.Auth{Flag: "redis", Name: "Redis", User: "Redis ACL user", TLS: "Redis servers"}
