package etcd

import (
	"time"

	"github.com/lockbench/lockbench/backends"
)

// TTLResolution is the granularity of an etcd lease's TTL: whole seconds
// (Info.TTLResolution).
const TTLResolution = time.Second

func init() {
	backends.Register(backends.Descriptor{
		Name:    "etcd",
		Doc:     "etcd leases and revisions on a three-member cluster, the key's create revision as fencing token",
		Open:    Open,
		Servers: backends.Servers{Kind: backends.Etcd, Count: 3},
		Probe:   Probe,
		// The server keeps a silent holder's key for its lease: the TTL
		// rounded up to whole seconds.
		Lease: func(ttl time.Duration, _ map[string]string) time.Duration {
			return (ttl + TTLResolution - 1) / TTLResolution * TTLResolution
		},
		NotApplicable: map[string]string{
			"failover": "etcd has no Sentinel to fail over: a leader's loss is what leader-kill and partition-leader do",
			"restart": "the restart fault restarts a majority of the members, empty under the fast profile: a cluster that loses a majority's data is gone, " +
				"which no consensus system claims to survive (crash-minority and leader-kill restart members with their data)",
			"clock-jump": "etcd leases run on the servers' monotonic clocks (TTLs are counted down by the leader, not read off a wall clock), so a wall-clock jump cannot expire them; " +
				"lockbench's clock-jump emulates a jump by moving Redis key expiries, which has no etcd equivalent",
		},
		Endpoints: backends.Endpoints{
			Flag:  "etcd",
			Usage: "the etcd endpoints",
			Auth:  backends.Auth{Flag: "etcd", Name: "etcd", User: "etcd user", TLS: "etcd"},
		},
	})
}
