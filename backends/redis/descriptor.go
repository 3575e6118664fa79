package redis

import (
	"github.com/lockbench/lockbench/backends"
)

func init() {
	backends.Register(backends.Descriptor{
		Name:    "redis",
		Doc:     "single-instance Redis: SET NX PX with a per-key fencing counter, safe while its one server runs and keeps its data",
		Open:    Open,
		Servers: backends.Servers{Kind: backends.Redis, Count: 1},
		// The default suite powers it off: the spec's claim that everysec
		// can lose a key and always cannot is about a Redis node.
		Variants: []backends.Variant{{Suites: backends.AllSuites, Showcase: []string{"power-loss"}}},
		Probe:    Probe,
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
