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
		NotApplicable: map[string]string{
			"failover": "etcd has no Sentinel to fail over: a leader's loss is what leader-kill and partition-leader do",
			"clock-jump": "etcd leases count down on the leader's monotonic clock (not read off a wall clock), which no wall-clock jump moves; " +
				"and no clock preload reaches an etcd member: a Go program reads its clocks through the vDSO, not libc (Chaos Mesh's TimeChaos patches the vDSO for that)",
			"clock-rate": "etcd leases count down on the leader's monotonic clock, whose rate could not be changed here: no clock preload reaches a Go program, " +
				"which reads its clocks through the vDSO, not libc (Chaos Mesh's TimeChaos patches the vDSO); how etcd depends on a clock's rate was not measured",
		},
		Endpoints: backends.Endpoints{
			Flag:  "etcd",
			Usage: "the etcd endpoints",
			Auth:  backends.Auth{Flag: "etcd", Name: "etcd", User: "etcd user", TLS: "etcd"},
		},
	})
}
