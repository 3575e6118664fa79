package sentinel

import (
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

func init() {
	backends.Register(backends.Descriptor{
		Name: "sentinel",
		Doc:  "the single-instance Redis lock on the master of a master–replica set that Redis Sentinel fails over",
		Open: Open,
		// A master and one replica, and the sentinels that watch them.
		Servers: backends.Servers{Kind: backends.Sentinel, Count: 2, MasterParam: "master"},
		// lockbench's Redlock on one node: TTL − (TTL×drift + 2 ms), its
		// default drift, from the start of the attempt that won.
		Contract: func(time.Duration, map[string]string) (locker.Info, error) {
			return locker.Info{DriftRate: redlock.DefaultDrift, Drift: 2 * time.Millisecond}, nil
		},
		Probe: redis.Probe,
		// WAIT is there for the failover: what it buys.
		Variants: []backends.Variant{{}, {Params: "wait=1"}},
		NotApplicable: map[string]string{
			"crash-minority":   "needs a cluster of at least 3 nodes: the Sentinel set has a master and one replica (losing the master is the failover fault's case)",
			"latency":          "needs servers the clients reach through proxies; Sentinel's clients follow the master the sentinels name, around any proxy",
			"partition-leader": "the fault cuts a consensus leader from its followers; a Sentinel set's Redis nodes elect nothing (the sentinels pick the master, and the failover fault cuts its replication)",
			"partition-halves": "the fault splits the members of a consensus cluster; a Sentinel set's Redis nodes only replicate from the master (the failover fault cuts that replication)",
			"leader-kill":      "killing a Sentinel set's master is the failover fault's case",
		},
		Endpoints: backends.Endpoints{
			Flag:   "sentinel",
			Usage:  "the sentinels of the sentinel backend",
			Auth:   redis.Auth,
			Params: []backends.ParamFlag{{Flag: "sentinel-master", Param: "master", Usage: "the master name the sentinels monitor"}},
		},
	})
}
