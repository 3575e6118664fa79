package redlockbackend_test

// The library's tests that need the benchmark's faults (proxies:
// partitions and latency) or its registry, moved here from
// backends/redlock so that the library module needs nothing of the
// benchmark.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
)

// TestSlowNodeCostsOthersNothing is item 5: a node that hangs (a
// blackholed link: dials connect and then nothing comes back; or a
// SIGSTOPped server) must cost the other callers nothing on the healthy
// nodes: no failed operation, and no healthy connection closed.
func TestSlowNodeCostsOthersNothing(t *testing.T) {
	for _, fault := range []string{"partition", "pause"} {
		t.Run(fault, func(t *testing.T) {
			nodes, addrs := fresh(t, 5, compose.Spec{Proxied: true})
			rl := newRedlock(t, addrs)
			warm(t, rl, addrs)
			slow := canonical(nodes)[0] // the first node each round sends to
			var healthy []*compose.Node
			for _, n := range nodes {
				if n != slow {
					healthy = append(healthy, n)
				}
			}
			conns := newCounter(t, healthy)
			before := conns.count(t)
			switch fault {
			case "partition":
				if err := slow.Partition(); err != nil {
					t.Fatal(err)
				}
			case "pause":
				if err := slow.Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { slow.Resume() })
			}
			// Long enough for the hung node's connection to be given up
			// (after lateFor, a second) and redialled several times.
			ops, failed, err := work(rl, "slow", 4, 3*time.Second)
			t.Logf("%d operations with one node of five hung", ops)
			if failed > 0 {
				t.Errorf("%d of %d operations failed with one node of five hung; the first: %v", failed, ops, err)
			}
			if opened := conns.count(t) - before; opened > 0 {
				t.Errorf("%d connections to the healthy nodes were opened again while one node hung", opened)
			}
		})
	}
}

// TestExtendAfterExpiryGivesBack is item 8: the watchdog's extension
// reaches the nodes, but its replies come back after the lease's local
// validity ended. The key is then re-armed on the nodes for nobody: the
// lease must give it back at once rather than leave it taken for a TTL.
func TestExtendAfterExpiryGivesBack(t *testing.T) {
	const ttl = 2 * time.Second
	const delay = 1500 * time.Millisecond // replies of the watchdog's extension, sent at ttl/3, arrive after ttl
	nodes, addrs := fresh(t, 5, compose.Spec{Proxied: true})
	// A node timeout above the delay, so that the slow extension counts.
	a := newRedlock(t, addrs, redlock.WithNodeTimeout(2*delay))
	b := newRedlock(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := a.Acquire(ctx, "k", locker.WithTTL(ttl), locker.WithAutoExtend(true))
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	for _, n := range nodes {
		if err := n.Delay(delay); err != nil {
			t.Fatal(err)
		}
	}
	<-lease.Done()
	for _, n := range nodes {
		if err := n.Heal(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("lease ended %v after the grant: %v", time.Since(acquired).Round(time.Millisecond), lease.Err())
	// The extension, sent at ttl/3, re-armed the key until ttl/3+ttl
	// after the grant. b must get it well before.
	rearmed := acquired.Add(ttl/3 + ttl)
	bctx, bcancel := context.WithDeadline(ctx, rearmed.Add(-300*time.Millisecond))
	defer bcancel()
	got, err := b.Acquire(bctx, "k", locker.WithRetry(locker.LinearBackoff(10*time.Millisecond)))
	if err != nil {
		t.Fatalf("the key stayed taken after the lease ended: %v", err)
	}
	t.Logf("b granted the key %v after the lease ended, %v before the extension's TTL would have run out", time.Since(acquired).Round(time.Millisecond), time.Until(rearmed).Round(time.Millisecond))
	got.Release(ctx)
}

// TestUnconfirmedRelease (issue 19, §3): a Release that never reached the
// nodes must not leave the lease saying "released" as if it had, and the
// key must not stay taken for its TTL: the release is retried at once in
// the background (its context had ended) and by Close (the nodes were
// unreachable until then).
//
// Each step waits for what it needs within a bound of its own (await's);
// the subtests' contexts only stop a hung call, within the composetest
// deadline: a budget of 20 s shared by steps whose own bounds add up to
// 30 s ran out on a loaded machine while every step was still within its
// bound.
func TestUnconfirmedRelease(t *testing.T) {
	const ttl = 30 * time.Second
	const budget = time.Minute // composetest's deadline kills the servers by then
	t.Run("cancelled context", func(t *testing.T) {
		_, addrs := fresh(t, 5, compose.Spec{})
		a, b := newRedlock(t, addrs), newRedlock(t, addrs)
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		lease, err := a.Acquire(ctx, "k", locker.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		gone, stop := context.WithCancel(ctx)
		stop()
		if err := lease.Release(gone); !errors.Is(err, context.Canceled) {
			t.Fatalf("Release on an ended context = %v, want an error wrapping context.Canceled", err)
		}
		if err := lease.Err(); !errors.Is(err, locker.ErrReleased) || !strings.Contains(err.Error(), "did not confirm") {
			t.Fatalf("Err after an unconfirmed Release = %v, want it to say the release was not confirmed", err)
		}
		t.Log(lease.Err())
		// Well before the TTL: a key that stayed taken until it expired
		// must fail the test, whatever the budget.
		soon, cancelSoon := context.WithTimeout(ctx, ttl/2)
		defer cancelSoon()
		got, err := b.Acquire(soon, "k", locker.WithRetry(locker.LinearBackoff(20*time.Millisecond)))
		if err != nil {
			t.Fatalf("the key stayed taken after an unconfirmed release: %v", err)
		}
		got.Release(ctx)
	})
	t.Run("nodes cut off until Close", func(t *testing.T) {
		nodes, addrs := fresh(t, 5, compose.Spec{Proxied: true})
		a, b := newRedlock(t, addrs), newRedlock(t, addrs)
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		lease, err := a.Acquire(ctx, "k", locker.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if err := n.Partition(); err != nil {
				t.Fatal(err)
			}
		}
		if err := lease.Release(ctx); !errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("Release with every node cut off = %v, want ErrUnavailable", err)
		}
		if err := lease.Err(); !errors.Is(err, locker.ErrReleased) || !strings.Contains(err.Error(), "did not confirm") {
			t.Fatalf("Err after an unconfirmed Release = %v, want it to say the release was not confirmed", err)
		}
		// Let the background retry fail too, then heal: Close retries.
		start := time.Now()
		await(t, 10*time.Second, "the background retry to give up", func() bool { return !hasGoroutine("redlock.(*hold).giveBack") })
		t.Logf("the background retry gave up after %v", time.Since(start).Round(time.Millisecond))
		for _, n := range nodes {
			if err := n.Heal(); err != nil {
				t.Fatal(err)
			}
		}
		start = time.Now()
		// The proxies dropped what the partition cut, dials included: wait
		// until a's connections to the nodes have been given up and made
		// again (a's own new locks are granted).
		await(t, 20*time.Second, "a reaching the nodes again", func() bool {
			l, err := a.TryAcquire(ctx, "probe")
			if err == nil {
				l.Release(ctx)
			}
			return err == nil
		})
		t.Logf("a reached the nodes again %v after the heal", time.Since(start).Round(time.Millisecond))
		if _, err := b.TryAcquire(ctx, "k"); err == nil {
			t.Fatal("the key was freed before Close")
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		// Well before the TTL: a key that stayed taken until it expired
		// must fail the test, whatever the budget.
		soon, cancelSoon := context.WithTimeout(ctx, ttl/2)
		defer cancelSoon()
		got, err := b.Acquire(soon, "k", locker.WithRetry(locker.LinearBackoff(20*time.Millisecond)))
		if err != nil {
			t.Fatalf("the key stayed taken after Close: %v", err)
		}
		got.Release(ctx)
	})
}
