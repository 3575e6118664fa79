package bench_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
	"github.com/lockbench/lockbench/workloads/nemesis"
)

// TestRunner runs a small matrix end to end on real servers: the results
// file holds every case, and noop shows what the checker is for.
func TestRunner(t *testing.T) {
	cases, err := bench.Cross(bench.Matrix{
		Backends:  []string{"noop", "redis"},
		Workloads: []workloads.Workload{workloads.Hot},
		Faults:    []string{"none", "restart"},
		Guards:    []workloads.Guard{workloads.GuardFence},
		Clients:   []int{4},
		Spec:      workloads.Spec{Duration: time.Second, TTL: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results.json")
	var events []bench.Event
	r := &bench.Runner{Clusters: bench.NewClusters(compose.ForTest(t), nil), Out: out, Progress: func(e bench.Event) { events = append(events, e) }}
	f, err := r.Run(context.Background(), cases)
	if err != nil {
		t.Fatal(err)
	}
	// noop has no servers to restart: that case is skipped, and said so.
	if len(f.Cases) != 3 {
		t.Fatalf("%d cases measured, want 3 (noop under restart skipped)", len(f.Cases))
	}
	skipped := 0
	for _, e := range events {
		if e.Skipped != nil {
			skipped++
		}
	}
	if skipped != 1 {
		t.Fatalf("%d cases reported skipped, want 1", skipped)
	}
	saved, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Cases) != 3 || saved.Partial {
		t.Fatalf("results.json has %d cases (partial %v), want 3 and complete", len(saved.Cases), saved.Partial)
	}
	for _, c := range saved.Cases {
		switch {
		case c.Backend == "noop" && c.Overlaps == 0:
			t.Errorf("noop under %s: no overlap in %d grants", c.Fault, c.Acquired)
		case c.Backend == "redis" && c.Fault == "none" && c.Overlaps+c.StaleAccepted+c.LostUpdates != 0:
			t.Errorf("redis without faults: violations %+v", c)
		case c.Acquired == 0 || c.Throughput <= 0 || c.Histograms.Acquire == "":
			t.Errorf("%s/%s measured nothing: %+v", c.Backend, c.Fault, c)
		}
	}
}

// TestRunnerKeepsPartialResults interrupts a run: what was measured is
// written, marked partial.
func TestRunnerKeepsPartialResults(t *testing.T) {
	none, _ := nemesis.Lookup("none")
	b, err := bench.ParseBackend("noop")
	if err != nil {
		t.Fatal(err)
	}
	spec := workloads.Spec{Workload: workloads.Hot, Clients: 2, Duration: 200 * time.Millisecond}
	cases := []bench.Case{{Backend: b, Fault: none, Guard: workloads.GuardNone, Spec: spec}, {Backend: b, Fault: none, Guard: workloads.GuardNone, Spec: spec}}
	ctx, cancel := context.WithCancel(context.Background())
	out := filepath.Join(t.TempDir(), "results.json")
	r := &bench.Runner{Clusters: bench.NewClusters(compose.ForTest(t), nil), Out: out, Progress: func(e bench.Event) {
		if e.Result != nil {
			cancel() // Ctrl-C after the first case
		}
	}}
	f, err := r.Run(ctx, cases)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	saved, rerr := results.Read(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !saved.Partial || len(saved.Cases) != 1 || len(f.Cases) != 1 {
		t.Fatalf("saved %d cases, partial %v; want the 1 measured, partial", len(saved.Cases), saved.Partial)
	}
}

func TestParseBackend(t *testing.T) {
	b, err := bench.ParseBackend("redlock?quarantine=false&fencing=true")
	if err != nil || b.Name != "redlock" || b.Params["quarantine"] != "false" || b.Params["fencing"] != "true" {
		t.Fatalf("ParseBackend = %+v, %v", b, err)
	}
	if _, err := bench.ParseBackend("zookeepr"); err == nil {
		t.Fatal("an unknown backend parsed")
	}
}

// TestClustersRenewSpentSentinel: a Fresh scenario (failover) gets a new
// Sentinel set, and so does the case after it, whatever its scenario,
// since the failover left that set changed; later cases share that one.
func TestClustersRenewSpentSentinel(t *testing.T) {
	clusters := bench.NewClusters(compose.ForTest(t), nil)
	b, err := bench.ParseBackend("sentinel")
	if err != nil {
		t.Fatal(err)
	}
	failover, _ := nemesis.Lookup("failover")
	none, _ := nemesis.Lookup("none")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var sets []*compose.SentinelSet
	for _, s := range []*nemesis.Scenario{none, failover, none, none} {
		target, _, err := clusters.Setup(ctx, b, s)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, target.Sentinel)
	}
	if sets[1] == sets[0] || sets[2] == sets[1] || sets[3] != sets[2] {
		t.Fatalf("sets none, failover, none, none: %p %p %p %p; want a new one for the failover and for the case after it, then shared", sets[0], sets[1], sets[2], sets[3])
	}
}

// TestClustersRenewRestartedRedlockNodes: the Redlock nodes are admitted
// once, when they are created (a client that opens them without the
// bootstrap param is granted a key at once); a case after one that
// restarted a node without its data (which Redlock would keep out of the
// quorum for a max TTL) gets new, admitted nodes; otherwise the nodes are
// kept.
func TestClustersRenewRestartedRedlockNodes(t *testing.T) {
	clusters := bench.NewClusters(compose.ForTest(t), nil)
	b, err := bench.ParseBackend("redlock")
	if err != nil {
		t.Fatal(err)
	}
	none, _ := nemesis.Lookup("none")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setup := func() []*compose.Node {
		t.Helper()
		target, cfg, err := clusters.Setup(ctx, b, none)
		if err != nil {
			t.Fatal(err)
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
		return target.Redis
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
