package redis

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

func init() {
	backends.Register(backends.Descriptor{
		Name:          "redis",
		Doc:           "single-instance Redis: SET NX PX with a per-key fencing counter, safe while its one server runs and keeps its data",
		Open:          Open,
		Servers:       backends.Servers{Kind: backends.Redis, Count: 1},
		NotApplicable: NotApplicable(1),
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

// NotApplicable returns the fault classes that cannot apply to a lock on
// n independent Redis masters (1 for this backend and rueidislock, 5 for
// redlock and redsync), each with why: the backends that run on
// standalone Redis share these reasons.
func NotApplicable(n int) map[string]string {
	if n == 1 {
		return map[string]string{
			"failover":         "one standalone Redis server has no replica to fail over to (the sentinel backend measures a failover)",
			"crash-minority":   "needs a cluster of at least 3 nodes: one Redis server has no minority to crash (its loss is what restart and server-pause do)",
			"partition-leader": "one Redis server has no peers: there is no leader to cut off from its followers",
			"partition-halves": "one Redis server has no peers to be split from",
			"leader-kill":      "one Redis server elects no leader (its loss is what restart and server-pause do)",
		}
	}
	return map[string]string{
		"failover":         fmt.Sprintf("the %d independent Redis masters have no replicas: there is nothing to fail over (the sentinel backend measures a failover)", n),
		"partition-leader": fmt.Sprintf("the %d independent Redis masters elect no leader and never talk to one another", n),
		"partition-halves": fmt.Sprintf("the %d independent Redis masters never talk to one another: there is no traffic between them to cut", n),
		"leader-kill":      fmt.Sprintf("the %d independent Redis masters elect no leader to kill (crash-minority kills any of them)", n),
	}
}
