package redlock_test

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

// TestExtendAfterExpiryGivesBack is item 8: the watchdog's extension
// reaches the nodes, but its replies come back after the lease's local
// validity ended. The key is then re-armed on the nodes for nobody: the
// lease must give it back at once rather than leave it taken for a TTL.
func TestExtendAfterExpiryGivesBack(t *testing.T) {
	const ttl = 2 * time.Second
	const delay = 1500 * time.Millisecond // replies of the watchdog's extension, sent at ttl/3, arrive after ttl
	nodes, addrs := fresh(t, 5, compose.RedisOptions{Proxied: true})
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

// TestFencingCountersExpire is item 11: with the clock floor, a key's
// fencing counter may expire (the floor keeps tokens increasing without
// it), so that every lock name does not leave a key on every node
// forever; with plain counters it must not.
func TestFencingCountersExpire(t *testing.T) {
	nodes, addrs := fresh(t, 5, compose.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, floor := range []bool{true, false} {
		rl := newRedlock(t, addrs, redlock.WithFencing(true), redlock.WithClockFloor(floor))
		key := map[bool]string{true: "floor", false: "counter"}[floor]
		var last uint64
		for i := range 3 {
			if i == 2 {
				// What expiry does: the counters are gone.
				for _, n := range nodes {
					keys, err := direct(t, n).Keys(ctx, "*"+key+"*").Result()
					if err != nil {
						t.Fatal(err)
					}
					for _, k := range keys {
						if k == key {
							continue
						}
						ttl, err := direct(t, n).PTTL(ctx, k).Result()
						if err != nil {
							t.Fatal(err)
						}
						t.Logf("%s: %q expires in %v", n.Name, k, ttl)
						if floor && ttl <= 0 {
							t.Errorf("clock floor: counter %q on %s never expires", k, n.Name)
						}
						if !floor && ttl > 0 {
							t.Errorf("plain counters: counter %q on %s expires in %v", k, n.Name, ttl)
						}
						if floor {
							direct(t, n).Del(ctx, k)
						}
					}
				}
			}
			lease, err := rl.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			tok, _ := lease.Token()
			if tok <= last {
				t.Errorf("%s: token %d after %d", key, tok, last)
			}
			last = tok
			lease.Release(ctx)
		}
	}
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
		_, addrs := fresh(t, 5, compose.RedisOptions{})
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
		nodes, addrs := fresh(t, 5, compose.RedisOptions{Proxied: true})
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
