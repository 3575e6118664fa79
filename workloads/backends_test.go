package workloads_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends"
	_ "github.com/lockbench/lockbench/backends/redis"
	_ "github.com/lockbench/lockbench/backends/redlockbackend"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// redisAddrs starts n real redis-server nodes for t and returns their
// addresses.
func redisAddrs(t *testing.T, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := redis.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: n}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i, node := range nodes {
		addrs[i] = node.Addr()
	}
	return addrs
}

// open opens one Locker per client, each with connections of its own as
// separate processes would have, closed when t ends. Goroutines still
// running once they are closed are reported as leaks.
func open(t *testing.T, backend string, clients int, cfg backends.Config) []locker.Locker {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	ls := make([]locker.Locker, clients)
	for i := range ls {
		l, err := backends.Open(backend, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
		t.Cleanup(func() { l.Close() })
	}
	return ls
}

func dist(t *testing.T, s string) workloads.Dist {
	t.Helper()
	d, err := workloads.ParseDist(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runCase runs spec as one case of goroutine clients and returns the
// results.Case it fills for guard g.
func runCase(t *testing.T, spec workloads.Spec, lockers []locker.Locker, g judge.Guard, section judge.SectionHook) results.Case {
	t.Helper()
	j, err := judge.New(judge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := workloads.RunCase(ctx, j, spec, []judge.Guard{g}, lockers, section)
	if err != nil {
		t.Fatal(err)
	}
	var c results.Case
	spec.Describe(&c)
	if err := o.Fill(&c, g); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s guard %s: %d grants in %.2fs (%.0f/s), acquire p50 %dµs p99 %dµs, errors %v; overlaps %d (%d lock bug, %d expired holder), stale accepted %d, stale rejected %d, lost updates %d, token regressions %d, linearizable %s/%s",
		c.Backend, c.Guard, c.Acquired, c.DurationS, c.Throughput, c.LatencyUS.P50, c.LatencyUS.P99, c.Errors,
		c.Overlaps, c.OverlapsLockBug, c.OverlapsExpiredHolder, c.StaleAccepted, c.StaleRejected, c.LostUpdates, c.TokenRegressions, c.Linearizable, c.LinearizableFenced)
	for _, n := range c.Notes {
		t.Logf("  note: %s", n)
	}
	return c
}

// contention is the load under which a correct lock must show no
// violation: every client on one key, a hold far inside the TTL, for 500
// operations — a count, not a duration, so that a busy machine makes the
// case longer rather than its evidence thinner (at 30 s it stops anyway).
func contention(t *testing.T) workloads.Spec {
	return workloads.Spec{Workload: workloads.Hot, Clients: 8, Hold: dist(t, "200us-1ms"), TTL: 5 * time.Second, MaxOps: 500, Duration: 30 * time.Second}
}

func checkSafe(t *testing.T, c results.Case) {
	t.Helper()
	if c.Overlaps != 0 || c.StaleAccepted != 0 || c.StaleRejected != 0 || c.LostUpdates != 0 || c.TokenRegressions != 0 {
		t.Fatalf("%s violated safety without any fault: %+v", c.Backend, c)
	}
	if c.Linearizable != results.Linearizable {
		t.Fatalf("%s judged %s by the mutex model without any fault: %s", c.Backend, c.Linearizable, c.LinearizableReason)
	}
	if c.Acquired < 50 {
		t.Fatalf("%s granted only %d sections in %.1fs", c.Backend, c.Acquired, c.DurationS)
	}
	// A loaded machine may make a node miss its per-node timeout, which is
	// an availability cost; a lease lost while held, or an unexplained
	// error, is not expected without a fault.
	if c.Errors[results.ErrLost] != 0 || c.Errors[results.ErrOther] != 0 {
		t.Fatalf("%s: errors %v without any fault; notes %q", c.Backend, c.Errors, c.Notes)
	}
}

func TestRedisIsSafeUnderContention(t *testing.T) {
	addrs := redisAddrs(t, 1)
	ls := open(t, "redis", 8, backends.Config{Addrs: addrs})
	c := runCase(t, contention(t), ls, judge.GuardFence, nil)
	checkSafe(t, c)
	if !c.Fencing || c.Nodes != 1 || c.Quorum != 1 {
		t.Fatalf("case %+v does not describe a fenced single Redis", c)
	}
}

func TestRedlockIsSafeUnderContention(t *testing.T) {
	addrs := redisAddrs(t, 5)
	// A node timeout above the default (TTL/100, at most 50 ms) keeps the
	// bootstrap dial from timing out on a loaded machine.
	ls := open(t, "redlock", 8, backends.Config{Addrs: addrs, Params: map[string]string{"bootstrap": "force", "nodetimeout": "250ms"}})
	c := runCase(t, contention(t), ls, judge.GuardFence, nil)
	checkSafe(t, c)
	if c.Nodes != 5 || c.Quorum != 3 {
		t.Fatalf("case %+v does not describe a 5-node Redlock", c)
	}
}

// TestLongHold is a holder that keeps its section well past its 100 ms
// TTL while its process runs on (a slow critical section, not a pause:
// worker-process tests in package bench stop the process for real).
// Another client is granted the key, and the slow holder then writes.
// Without a guard the stale write lands (and an increment is lost);
// fencing tokens and the CAS mark reject it. The overlaps are those of an
// expired holder, not lock bugs.
func TestLongHold(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 29 s on a 2-core machine loaded about 10×
	addrs := redisAddrs(t, 1)
	ls := open(t, "redis", 6, backends.Config{Addrs: addrs})
	for _, tc := range []struct {
		guard judge.Guard
		// staleAccepted: whether stale writes must land (else none may).
		staleAccepted bool
	}{
		{judge.GuardNone, true},
		{judge.GuardFenceRW, false},
		{judge.GuardCAS, false},
	} {
		t.Run(string(tc.guard), func(t *testing.T) {
			// 120 operations, so three slow holders whatever the
			// machine's speed (1.5 s made 40 grants, one slow holder
			// and no overlap, on a busy machine); 30 s at most.
			spec := workloads.Spec{
				Workload: workloads.Hot, Clients: 6, Hold: dist(t, "1ms"),
				TTL: 100 * time.Millisecond, MaxOps: 120, Duration: 30 * time.Second,
			}
			c := runCase(t, spec, ls, tc.guard, workloads.EveryNth(40, judge.Action{Hold: 500 * time.Millisecond}))
			// Whatever the guard, the lock itself let two holders in and
			// the slow holders found their leases gone.
			if c.Overlaps == 0 || c.OverlapsExpiredHolder != c.Overlaps || c.Errors[results.ErrLost] == 0 {
				t.Fatalf("holders past their TTL: overlaps %d (%d expired holder), lost leases %d; want expired-holder overlaps and lost leases",
					c.Overlaps, c.OverlapsExpiredHolder, c.Errors[results.ErrLost])
			}
			if c.Linearizable != results.NotLinearizable || c.LinearizableFenced != results.Linearizable {
				t.Fatalf("verdicts: mutex %s, fenced %s (%s); want false, true", c.Linearizable, c.LinearizableFenced, c.LinearizableFencedReason)
			}
			if c.TokenRegressions != 0 {
				t.Fatalf("%d token regressions from one Redis server", c.TokenRegressions)
			}
			switch {
			case tc.staleAccepted && c.StaleAccepted == 0:
				t.Fatalf("guard %s: no stale write accepted", tc.guard)
			case !tc.staleAccepted && (c.StaleAccepted != 0 || c.StaleRejected == 0 || c.LostUpdates != 0):
				t.Fatalf("guard %s: stale accepted %d, rejected %d, lost %d; want 0, > 0, 0", tc.guard, c.StaleAccepted, c.StaleRejected, c.LostUpdates)
			}
			if tc.guard == judge.GuardNone && c.LostUpdates == 0 {
				t.Fatal("stale writes accepted without a guard, yet no update lost")
			}
		})
	}
}
