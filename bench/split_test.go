package bench_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// TestSplitViewRedlock runs one split-view injection on Redlock's five
// nodes with four worker processes, each in a client namespace of its
// own, reporting to the judge through the relay: the injection is tested
// and proven — one client's (the holder's) dials to redis-3 and redis-4 time out while
// it reaches the other three, another's to redis-0 and redis-1, and the
// two clients left whole reach every node.
func TestSplitViewRedlock(t *testing.T) {
	composetest.StartsServers(t)
	if err := compose.PeerNetworkAvailable(); err != nil {
		t.Skip(err)
	}
	hold, _ := workloads.Constant(time.Millisecond)
	f, _ := runMatrix(t, suites.Matrix{
		Backends: []string{"redlock"}, Workloads: []workloads.Workload{workloads.Hot}, Faults: []string{"split-view"},
		Guards: []judge.Guard{judge.GuardNone}, Clients: []int{4}, Injections: 1,
		Spec: workloads.Spec{Hold: hold, Duration: 3 * time.Second, TTL: time.Second},
	})
	c := find(f, "redlock", "split-view", "none")
	if c == nil {
		t.Fatalf("results %+v", f.Cases)
	}
	if c.Invalid || c.Injections != 1 || len(c.Targets) != 1 {
		t.Fatalf("invalid %v (%s): %d injections, targets %+v", c.Invalid, c.InvalidReason, c.Injections, c.Targets)
	}
	x := c.Targets[0]
	if x.Tested == nil || !*x.Tested {
		t.Fatalf("injection not tested: %+v", x)
	}
	for _, want := range []string{
		"the holder) cut from redis-3, redis-4 (a connection timed out", "reaches redis-0, redis-1, redis-2",
		"cut from redis-0, redis-1 (a connection timed out", "reaches redis-2, redis-3, redis-4", "2 other clients reach every node",
	} {
		if !strings.Contains(x.Effect, want) {
			t.Errorf("effect %q lacks %q", x.Effect, want)
		}
	}
	if c.Acquired == 0 {
		t.Error("no grant reached the judge from the client namespaces")
	}
}
