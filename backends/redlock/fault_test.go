//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// cluster starts five fresh Redis masters for one test, admits them, and
// returns them with a Redlock factory over them.
func cluster(t *testing.T, o redisOptions) ([]*server, func(opts ...redlock.Option) *redlock.Redlock) {
	t.Helper()
	nodes, addrs := fresh(t, 5, o)
	return nodes, func(opts ...redlock.Option) *redlock.Redlock { return newRedlock(t, addrs, opts...) }
}

func TestMinorityDown(t *testing.T) {
	nodes, newRedlock := cluster(t, redisOptions{})
	// Checked after the Redlock is closed (cleanups run last-in first-out)
	// and before the cluster is stopped.
	ignore := locktest.Running()
	t.Cleanup(func() { ignore.Leaked(t) })
	rl := newRedlock(redlock.WithFencing(true))
	for _, n := range nodes[:2] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := rl.Acquire(ctx, "k", locker.WithTTL(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire with 2 of 5 nodes down: %v", err)
	}
	if err := lease.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("Extend with 2 of 5 nodes down: %v", err)
	}
	// The release frees the key on the live majority: that is a release.
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release with 2 of 5 nodes down: %v", err)
	}
	if _, err := rl.TryAcquire(ctx, "k"); err != nil {
		t.Fatalf("the key is not free after Release on the live majority: %v", err)
	}
}

func TestMajorityDown(t *testing.T) {
	nodes, newRedlock := cluster(t, redisOptions{})
	rl := newRedlock()
	for _, n := range nodes[:3] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := rl.Acquire(ctx, "k")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Acquire took %v with a 500ms ctx", took)
	}
	// The contract: an error wrapping ctx.Err() when the context ends
	// first. When an attempt had ended before, the error carries it too,
	// naming the nodes that failed (issue 20, §4).
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with 3 of 5 down = %v; want an error wrapping the context's", err)
	}
	if errors.Is(err, locker.ErrNotAcquired) {
		for _, n := range nodes[:3] {
			if !strings.Contains(err.Error(), n.Addr()) {
				t.Errorf("error does not name dead node %s: %v", n.Addr(), err)
			}
		}
		var ne *locker.NodeError
		if !errors.As(err, &ne) {
			t.Errorf("error carries no locker.NodeError: %v", err)
		}
	}
	t.Log(err)
}

// TestRestartQuarantine restarts a majority of nodes without their data
// while A holds the key. Without the quarantine B is granted the key at
// once, while A still holds it; with it, B waits until the restarted
// nodes have been up for one max TTL, by which time A's lease is over.
//
// A's lease must still be valid when the restarts are done, or there is
// nothing to test: the nodes restart at once (restartAll), and without
// the quarantine, where B's grant waits for no max TTL, A's lease is a
// long one, so that a loaded machine's slow restarts cannot outlast it
// (they once outlasted 8 s, three restarts in turn); with it, where B
// waits one max TTL, 12 s (under two busy loops and -race, 8 s left A's
// lease 1.8 s after restarts at once).
func TestRestartQuarantine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		quarantine bool
		maxTTL     time.Duration
	}{
		{"without", false, 30 * time.Second},
		{"with", true, 12 * time.Second},
	} {
		quarantine, maxTTL, name := tc.quarantine, tc.maxTTL, tc.name
		t.Run(name, func(t *testing.T) {
			nodes, newRedlock := cluster(t, redisOptions{})
			opts := []redlock.Option{redlock.WithQuarantine(quarantine), redlock.WithMaxTTL(maxTTL)}
			a, b := newRedlock(opts...), newRedlock(opts...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			leaseA, err := a.Acquire(ctx, "k", locker.WithTTL(maxTTL))
			if err != nil {
				t.Fatal(err)
			}
			restartAll(t, nodes[:3], false)
			restarted := time.Now()
			if !restarted.Before(leaseA.ValidUntil()) {
				t.Fatalf("the restarts outlasted A's lease of %v: nothing left to test", maxTTL)
			}
			leaseB, err := b.Acquire(ctx, "k", locker.WithTTL(maxTTL), locker.WithRetry(locker.LinearBackoff(20*time.Millisecond)))
			if err != nil {
				t.Fatalf("B never acquired: %v", err)
			}
			granted := time.Now()
			overlap := granted.Before(leaseA.ValidUntil())
			t.Logf("%s quarantine: B granted %v after the restart; A valid until %v after it (overlap: %v)",
				name, granted.Sub(restarted).Round(time.Millisecond), leaseA.ValidUntil().Sub(restarted).Round(time.Millisecond), overlap)
			if quarantine && overlap {
				t.Fatalf("B was granted the key while A's lease was valid: the quarantine did not hold")
			}
			if quarantine && granted.Sub(restarted) < maxTTL-time.Second {
				t.Fatalf("B was granted the key %v after the restart, before the restarted nodes served one max TTL", granted.Sub(restarted))
			}
			if !quarantine && !overlap {
				t.Fatalf("without quarantine B should get the key from the restarted majority while A holds it")
			}
			_ = leaseB.Release(ctx)
		})
	}
}

// TestTokensIncreaseAcrossRestarts takes a key over and over while nodes
// are killed and restarted with their data (AOF, fsync always) at random:
// every grant's token, from plain counters, must exceed the one before.
// The run lasts a fixed number of restart rounds, not a number of grants,
// so that what it covers (grants across restarts) is the same on a fast
// machine and on a loaded one, and its length follows the restarts' own.
func TestTokensIncreaseAcrossRestarts(t *testing.T) {
	nodes, newRedlock := cluster(t, redisOptions{Durable: true})
	// Plain counters, so that persistence alone is what keeps them
	// increasing; and no quarantine, which would keep nodes restarted this
	// often out of the quorum (with their data, they need not be).
	rl := newRedlock(redlock.WithFencing(true), redlock.WithClockFloor(false), redlock.WithQuarantine(false))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const rounds = 10
	done := make(chan struct{})
	var wg sync.WaitGroup
	restarts := 0
	wg.Go(func() {
		defer close(done)
		for range rounds {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(50+rand.IntN(150)) * time.Millisecond):
			}
			// Restart one or two random nodes: a majority stays up.
			for _, i := range rand.Perm(5)[:1+rand.IntN(2)] {
				if err := nodes[i].Restart(ctx, true); err != nil {
					t.Error(err)
					return
				}
				restarts++
			}
		}
	})
	var last uint64
	grants := 0
	for running := true; running; grants++ {
		select {
		case <-done:
			running = false // one more grant, after the last restart
		default:
		}
		lease, err := rl.Acquire(ctx, "k", locker.WithTTL(500*time.Millisecond))
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("grant %d: %v", grants, err)
		}
		tok, _ := lease.Token()
		if tok <= last {
			cancel()
			wg.Wait()
			t.Fatalf("grant %d: token %d not above the previous %d", grants, tok, last)
		}
		last = tok
		_ = lease.Release(ctx) // may fail on a node being restarted
	}
	wg.Wait()
	t.Logf("%d grants, tokens strictly increasing to %d, across %d node restarts in %d rounds", grants, last, restarts, rounds)
	if restarts == 0 {
		t.Fatal("no node was restarted during the run")
	}
}

// TestClockFloor shows what a majority of nodes restarted without their
// data does to tokens, and that the clock floor prevents it: the
// restarted nodes' counters start again from zero.
func TestClockFloor(t *testing.T) {
	for _, floor := range []bool{false, true} {
		name := map[bool]string{false: "counter only", true: "clock floor"}[floor]
		t.Run(name, func(t *testing.T) {
			nodes, newRedlock := cluster(t, redisOptions{})
			rl := newRedlock(redlock.WithFencing(true), redlock.WithClockFloor(floor), redlock.WithQuarantine(false))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var before uint64
			for range 50 {
				lease, err := rl.Acquire(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				before, _ = lease.Token()
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// Three nodes lose everything; the two that remember are down.
			for _, n := range nodes[:3] {
				if err := n.Restart(ctx, false); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range nodes[3:] {
				if err := n.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			lease, err := rl.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			after, _ := lease.Token()
			t.Logf("%s: token %d before the restart, %d after", name, before, after)
			if floor && after <= before {
				t.Fatalf("clock floor: token %d after the restart is not above %d", after, before)
			}
			if !floor && after > before {
				t.Fatalf("counter only: expected the restarted majority to hand out a lower token than %d, got %d", before, after)
			}
		})
	}
}
