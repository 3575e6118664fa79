package etcd

import (
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
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
		Contract: func(time.Duration, map[string]string) (locker.Info, error) {
			return locker.Info{TTLResolution: TTLResolution, DriftRate: 0.11, Drift: 2 * time.Millisecond}, nil
		},
		Probe: Probe,
		// The server keeps a silent holder's key for its lease: the TTL
		// rounded up to whole seconds.
		Lease: func(ttl time.Duration, _ map[string]string) time.Duration {
			return (ttl + TTLResolution - 1) / TTLResolution * TTLResolution
		},
		Endpoints: backends.Endpoints{
			Flag:  "etcd",
			Usage: "the etcd endpoints",
			Auth:  backends.Auth{Flag: "etcd", Name: "etcd", User: "etcd user", TLS: "etcd"},
		},
	})
}
