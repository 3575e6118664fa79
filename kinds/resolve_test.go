package kinds_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/kinds/etcd"
	"github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/kinds/sentinel"
	"github.com/lockbench/lockbench/kinds/zookeeper"
	"github.com/lockbench/lockbench/remote"
)

// TestSpecResolve checks how each kind resolves a compose.Spec against its
// Rules: the count and durability it fills in, and an error naming what
// the kind cannot start with, before anything starts.
func TestSpecResolve(t *testing.T) {
	place := func(n int) []compose.Placement {
		out := make([]compose.Placement, n)
		for i := range out {
			out[i] = compose.Placement{Host: remote.Local{}, Addr: netip.MustParseAddr("127.0.0.1"), Port: 7000 + i, Dir: "/tmp/x"}
		}
		return out
	}
	type Spec = compose.Spec
	const (
		DurabilityFast     = compose.DurabilityFast
		DurabilityPeriodic = compose.DurabilityPeriodic
		DurabilityDurable  = compose.DurabilityDurable
	)
	for _, tc := range []struct {
		name    string
		k       compose.Rules
		s       Spec
		nodes   int
		d       compose.Durability
		wantErr string
		noDur   bool
	}{
		{name: "postgres: one by default", k: postgres.Rules, s: Spec{}, nodes: 1, d: DurabilityDurable},
		{name: "postgres: three", k: postgres.Rules, s: Spec{Nodes: 3}, wantErr: "3 PostgreSQL servers: want at most 1"},
		{name: "postgres: placed on two", k: postgres.Rules, s: Spec{On: place(2)}, wantErr: "2 PostgreSQL servers: want at most 1"},
		{name: "postgres: placed", k: postgres.Rules, s: Spec{On: place(1), Durability: DurabilityPeriodic}, nodes: 1, d: DurabilityPeriodic},
		{name: "zookeeper: FakeClock", k: zookeeper.Rules, s: Spec{Nodes: 1, FakeClock: true}, nodes: 1, d: DurabilityDurable},
		{name: "zookeeper: periodic", k: zookeeper.Rules, s: Spec{Nodes: 3, Durability: DurabilityPeriodic}, wantErr: "forceSync", noDur: true},
		{name: "zookeeper: placed, odd", k: zookeeper.Rules, s: Spec{On: place(2)}, wantErr: "2 ZooKeeper servers: want an odd number"},
		{name: "etcd: even", k: etcd.Rules, s: Spec{Nodes: 2}, wantErr: "2 etcd members: want an odd number"},
		{name: "etcd: durable by default", k: etcd.Rules, s: Spec{Nodes: 3}, nodes: 3, d: DurabilityDurable},
		{name: "etcd: fast", k: etcd.Rules, s: Spec{Nodes: 1, Durability: DurabilityFast}, nodes: 1, d: DurabilityFast},
		{name: "etcd: periodic", k: etcd.Rules, s: Spec{Nodes: 1, Durability: DurabilityPeriodic}, wantErr: "no periodic", noDur: true},
		{name: "etcd: FakeClock", k: etcd.Rules, s: Spec{Nodes: 1, FakeClock: true}, wantErr: "etcd members with FakeClock"},
		{name: "redis: a count", k: redis.Rules, s: Spec{Nodes: 2}, nodes: 2, d: DurabilityFast},
		{name: "redis: no count", k: redis.Rules, s: Spec{}, wantErr: "0 Redis nodes: want at least 1"},
		{name: "redis: negative", k: redis.Rules, s: Spec{Nodes: -1}, wantErr: "-1 Redis nodes"},
		{name: "redis: placed, counted by On", k: redis.Rules, s: Spec{On: place(3)}, nodes: 3, d: DurabilityFast},
		{name: "redis: placed, one each", k: redis.Rules, s: Spec{Nodes: 2, On: place(3)}, wantErr: "2 Redis nodes on 3 placements"},
		{name: "redis: placed with a proxy here", k: redis.Rules, s: Spec{On: place(1), Proxied: true}, wantErr: "with Proxied"},
		{name: "redis: placed in a namespace", k: redis.Rules, s: Spec{On: place(1), Netns: true, Proxied: true},
			wantErr: "with Proxied and Netns"},
		{name: "redis: unknown durability", k: redis.Rules, s: Spec{Nodes: 1, Durability: "sometimes"}, wantErr: `durability "sometimes"`},
		{name: "sentinel: the smallest set", k: sentinel.Rules, s: Spec{}, nodes: 2, d: DurabilityFast},
		{name: "sentinel: no replica", k: sentinel.Rules, s: Spec{Nodes: 1}, wantErr: "1 Redis nodes in a Sentinel set: want at least 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.Resolve(tc.k)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				if tc.noDur && !errors.Is(err, compose.ErrNoDurability) {
					t.Errorf("%v does not wrap ErrNoDurability", err)
				}
				return
			}
			if err != nil || got.Nodes != tc.nodes || got.Durability != tc.d {
				t.Fatalf("Resolve = %d nodes, %q, %v; want %d, %q", got.Nodes, got.Durability, err, tc.nodes, tc.d)
			}
		})
	}
}
