package rueidislock

import (
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
)

func init() {
	backends.Register(backends.Descriptor{
		Name: "rueidislock",
		Doc:  "github.com/redis/rueidis/rueidislock, the Redis maintainers' Go lock, on the redis backend's server",
		Open: Open,
		// The redis backend's server: both are measured on the same node.
		Servers: backends.Servers{Kind: backends.Redis, Count: 1},
		KeyLife: keyLife,
		// It runs on one Redis server, as the redis backend does.
		Probe: redis.Probe,
		Endpoints: backends.Endpoints{
			Flag:  "rueidislock",
			Usage: "the single Redis server of rueidislock",
			Or:    "redis",
			Auth:  redis.Auth,
		},
	})
}

// keyLife is how long the keys of a silent holder live on the server: the
// keys are kept their validity (the validity param, DefaultKeyValidity
// by default) ahead of now, longer than any lease they back.
func keyLife(ttl time.Duration, params map[string]string) time.Duration {
	if d, err := time.ParseDuration(params["validity"]); err == nil {
		return max(ttl, d)
	}
	return max(ttl, DefaultKeyValidity)
}
