package bench_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// TestClientClockRedlock: client-clock on our Redlock (its hand-off
// path, unfenced) stops a worker that is in Acquire from within itself,
// its lock's clock standing still: each stop is proven (every thread in
// state T) and located in the client's cycle, and the workers go on
// granting after it.
func TestClientClockRedlock(t *testing.T) {
	composetest.StartsServers(t)
	hold, _ := workloads.Constant(time.Millisecond)
	f, _ := runMatrix(t, suites.Matrix{
		Backends: []string{"redlock?fencing=false"}, Workloads: []workloads.Workload{workloads.Hot}, Faults: []string{"client-clock"},
		Guards: []judge.Guard{judge.GuardNone}, Clients: []int{4}, Injections: 2,
		Spec: workloads.Spec{Hold: hold, Duration: 3 * time.Second, TTL: 500 * time.Millisecond},
	})
	c := find(f, "redlock?fencing=false", "client-clock", "none")
	if c == nil {
		t.Fatalf("results %+v", f.Cases)
	}
	if c.Invalid || c.Injections != 2 || len(c.Targets) != 2 {
		t.Fatalf("invalid %v (%s): %d injections, targets %+v", c.Invalid, c.InvalidReason, c.Injections, c.Targets)
	}
	landed := 0
	for _, x := range c.Targets {
		if !strings.Contains(x.Precondition, "its lock's clock standing still") || !strings.Contains(x.Effect, "stopped (state T)") {
			t.Errorf("injection %d: precondition %q, effect %q: want the worker's own stop, proven", x.Injection, x.Precondition, x.Effect)
		}
		if x.Aimed != string(history.PointAcquire) || x.Landed == "" {
			t.Errorf("injection %d aimed at %q, landed at %q: want aimed at acquire, and located", x.Injection, x.Aimed, x.Landed)
		}
		if x.Landed == string(history.PointAcquire) {
			landed++
		}
	}
	if landed == 0 {
		t.Errorf("no stop landed in Acquire: %+v", c.Targets)
	}
	if c.Acquired == 0 {
		t.Error("no grant reached the judge")
	}
}
