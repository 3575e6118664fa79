package bench_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

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

// TestRunnerNewBackends runs postgres in both modes and rueidislock end
// to end on the servers Clusters starts for them: without faults none of
// them violates anything, and under client-pause the lease mode's tokens
// let the resource reject every stale write.
func TestRunnerNewBackends(t *testing.T) {
	cases, err := bench.Cross(bench.Matrix{
		Backends:  []string{"postgres?mode=advisory", "postgres?mode=lease", "rueidislock"},
		Workloads: []workloads.Workload{workloads.Hot},
		Faults:    []string{"none", "client-pause"},
		Guards:    []workloads.Guard{workloads.GuardFence},
		Clients:   []int{4},
		Spec:      workloads.Spec{Duration: 2 * time.Second, TTL: 300 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &bench.Runner{Clusters: bench.NewClusters(compose.ForTest(t), nil)}
	f, err := r.Run(context.Background(), cases)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != len(cases) {
		t.Fatalf("%d of %d cases measured", len(f.Cases), len(cases))
	}
	for _, c := range f.Cases {
		t.Logf("%s/%s: %d grants, %.0f/s, %d overlaps, %d stale writes accepted, %d rejected", c.Backend, c.Fault, c.Acquired, c.Throughput, c.Overlaps, c.StaleAccepted, c.StaleRejected)
		switch {
		case c.Acquired == 0:
			t.Errorf("%s/%s granted nothing", c.Backend, c.Fault)
		case c.Fault == "none" && c.Overlaps+c.StaleAccepted+c.LostUpdates != 0:
			t.Errorf("%s without faults: violations %+v", c.Backend, c)
		case c.Backend == "postgres?mode=lease" && c.StaleAccepted != 0:
			t.Errorf("postgres lease mode under %s: %d stale writes accepted despite its tokens", c.Fault, c.StaleAccepted)
		}
	}
}
