package redsync

import (
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
)

func init() {
	backends.Register(backends.Descriptor{
		Name: "redsync",
		Doc:  "github.com/go-redsync/redsync/v4, the reference Go Redlock, on the same five masters as lockbench's",
		Open: Open,
		// Redlock's five masters: both are measured on the same nodes.
		Servers: backends.Servers{Kind: backends.Redis, Count: 5},
		Probe:   redis.Probe,
		Endpoints: backends.Endpoints{
			Flag:  "redsync",
			Usage: "the Redis masters of redsync",
			Or:    "redlock",
			Auth:  redis.Auth,
		},
	})
}
