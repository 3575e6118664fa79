package bench_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/kinds/sentinel"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
)

// TestClustersRenewSpentSentinel: a Fresh scenario (failover) gets a new
// Sentinel set, and so does the case after it, whatever its scenario,
// since the failover left that set changed; later cases share that one.
// The durable profile has a set of its own.
func TestClustersRenewSpentSentinel(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 22 s on a 2-core machine loaded about 10×
	clusters := bench.NewClusters(composetest.ForTest(t), nil)
	b, err := bench.ParseBackend("sentinel")
	if err != nil {
		t.Fatal(err)
	}
	failover, _ := nemesis.Parse("failover")
	none, _ := nemesis.Parse("none")
	ctx := composetest.Context(t)
	var sets []*sentinel.Set
	for _, s := range []nemesis.Fault{none, failover, none, none} {
		target, _, err := clusters.Setup(ctx, b, s, results.DurabilityFast, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := target.Shape(), plainShape(b); got.Nodes != want.Nodes || got.Caps != want.Caps {
			t.Fatalf("the servers' shape %+v differs from the one the suites plan with, %+v", got, want)
		}
		sets = append(sets, sentinelSet(t, target))
	}
	if sets[1] == sets[0] || sets[2] == sets[1] || sets[3] != sets[2] {
		t.Fatalf("sets none, failover, none, none: %p %p %p %p; want a new one for the failover and for the case after it, then shared", sets[0], sets[1], sets[2], sets[3])
	}
	durable, _, err := clusters.Setup(ctx, b, none, results.DurabilityDurable, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if sentinelSet(t, durable) == sets[3] {
		t.Fatal("the durable profile shares the fast profile's servers")
	}
}

// sentinelSet returns the Sentinel set of target, as compose started it.
func sentinelSet(t *testing.T, target nemesis.Target) *sentinel.Set {
	t.Helper()
	s, ok := target.Sentinel.(sentinel.FailoverSet)
	if !ok {
		t.Fatalf("the target's failover set is %T, not a Sentinel set", target.Sentinel)
	}
	return s.Set
}

// TestClustersStartSentinelForItsFault: a case whose fault needs its
// servers started so gets a Sentinel set whose Redis nodes have it — a
// lazy filesystem for a power loss, the clock preload for a clock jump, a
// network namespace each for a partition (and then no replication
// proxies on this host, which the cut would take in) — and so the fault
// applies to the target.
func TestClustersStartSentinelForItsFault(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute)
	for _, need := range []func() error{compose.LazyFSAvailable, compose.FakeClockAvailable, compose.PeerNetworkAvailable} {
		if err := need(); err != nil {
			t.Skip(err)
		}
	}
	clusters := bench.NewClusters(composetest.ForTest(t), nil)
	b, err := bench.ParseBackend("sentinel")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		fault string
		want  func(nemesis.Shape) bool
	}{
		{"power-loss", func(sh nemesis.Shape) bool {
			return sh.Has(nemesis.LosableData) && !sh.Has(nemesis.MovableClock) && !sh.Has(nemesis.ClientLinks) && sh.Has(nemesis.Failover)
		}},
		{"clock-jump", func(sh nemesis.Shape) bool {
			return sh.Has(nemesis.MovableClock) && !sh.Has(nemesis.LosableData) && !sh.Has(nemesis.ClientLinks) && sh.Has(nemesis.Failover)
		}},
		{"partition", func(sh nemesis.Shape) bool {
			return sh.Has(nemesis.ClientLinks) && !sh.Has(nemesis.LosableData) && !sh.Has(nemesis.MovableClock) && !sh.Has(nemesis.Failover)
		}},
	} {
		f, err := nemesis.Parse(tc.fault)
		if err != nil {
			t.Fatal(err)
		}
		target, cfg, err := clusters.Setup(ctx, b, f, results.DurabilityFast, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.fault, err)
		}
		if sh := target.Shape(); !tc.want(sh) || !sh.Has(nemesis.Leadership) || sh.Nodes != 2 {
			t.Errorf("%s: the set's shape %+v", tc.fault, sh)
		}
		if err := f.Applies(target); err != nil {
			t.Errorf("%s: %v", tc.fault, err)
		}
		if len(cfg.Addrs) != 3 || cfg.Params["master"] != sentinelSet(t, target).MasterName {
			t.Errorf("%s: the clients are given %v, params %v: want the 3 sentinels and the master's name", tc.fault, cfg.Addrs, cfg.Params)
		}
	}
}

// TestClustersRenewRestartedRedlockNodes: the Redlock nodes are admitted
// once, when they are created (a client that opens them without the
// bootstrap param is granted a key at once); a case after one that
// restarted a node without its data (which Redlock would keep out of the
// quorum for a max TTL) gets new, admitted nodes; otherwise the nodes are
// kept.
func TestClustersRenewRestartedRedlockNodes(t *testing.T) {
	clusters := bench.NewClusters(composetest.ForTest(t), nil)
	b, err := bench.ParseBackend("redlock")
	if err != nil {
		t.Fatal(err)
	}
	none, _ := nemesis.Parse("none")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setup := func() []*compose.Node {
		t.Helper()
		target, cfg, err := clusters.Setup(ctx, b, none, results.DurabilityFast, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := target.Shape(), plainShape(b); got.Nodes != want.Nodes || got.Caps != want.Caps {
			t.Fatalf("the servers' shape %+v differs from the one the suites plan with, %+v", got, want)
		}
		if _, set := cfg.Params["bootstrap"]; set {
			t.Fatalf("the clients' config carries the bootstrap param: %v", cfg.Params)
		}
		l, err := backends.Open("redlock", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lease, err := l.TryAcquire(ctx, fmt.Sprintf("admitted:%d", time.Now().UnixNano()))
		if err != nil {
			t.Fatalf("a client of the case's nodes is not granted a free key at once: %v", err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		nodes, err := kinds.ComposeNodes(target.Nodes)
		if err != nil {
			t.Fatal(err)
		}
		return nodes
	}
	first := setup()
	if again := setup(); again[0] != first[0] {
		t.Fatalf("nodes replaced although none restarted")
	}
	if err := first[2].Restart(ctx, false); err != nil { // what a restart fault and Repair leave
		t.Fatal(err)
	}
	renewed := setup()
	for _, n := range renewed {
		if slices.Contains(first, n) {
			t.Fatalf("node %s kept after a node of its cluster restarted without its data", n.Name)
		}
	}
}

// plainShape is the shape of b's servers for a case whose fault needs no
// lazy filesystem, clock preload or network namespaces of their own: the
// shape the suites plan with, without them.
func plainShape(b bench.Backend) nemesis.Shape {
	sh := bench.Shape(b)
	sh.Caps &^= nemesis.LosableData | nemesis.MovableClock | nemesis.ClientLinks | nemesis.ClientNets
	return sh
}
