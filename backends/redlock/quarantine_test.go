//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// The restart quarantine's holes (issue 13, items 1–4): each test has a
// holder H whose lease is valid while a majority of the nodes forgets
// it, and checks that nobody else is granted the key before H's lease
// ends.

// restartAll restarts nodes at once, with or without their data.
func restartAll(t *testing.T, nodes []*server, keepData bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Restart(ctx, keepData) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// notGrantedWhileValid tries key on g, every 20 ms, until h's lease
// ends, and fails t if g is granted it before then.
func notGrantedWhileValid(t *testing.T, g locker.Locker, key string, h locker.Lease, ttl time.Duration) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for time.Now().Before(h.ValidUntil()) {
		ctx, cancel := context.WithDeadline(context.Background(), h.ValidUntil())
		lease, err := g.TryAcquire(ctx, key, locker.WithTTL(ttl))
		cancel()
		if err == nil {
			left := time.Until(h.ValidUntil())
			lease.Release(context.Background())
			t.Fatalf("granted %q %v before the holder's lease ended: the nodes that forgot it voted", key, left.Round(time.Millisecond))
		}
		if !errors.Is(err, locker.ErrNotAcquired) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("TryAcquire = %v, want ErrNotAcquired", err)
		}
		last = err
		<-tick.C
	}
	t.Logf("refused until the holder's lease ended; the last refusal: %v", last)
}

// TestBootstrapAfterRestart is item 1: three nodes restart empty while H
// holds k and some process calls Bootstrap, as a start-up routine would.
// Bootstrap must not admit the restarted nodes.
func TestBootstrapAfterRestart(t *testing.T) {
	const maxTTL = 3 * time.Second
	nodes, addrs := fresh(t, 5, redisOptions{})
	opts := []redlock.Option{redlock.WithMaxTTL(maxTTL)}
	h := newRedlock(t, addrs, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := h.Acquire(ctx, "k", locker.WithTTL(maxTTL))
	if err != nil {
		t.Fatal(err)
	}
	restartAll(t, canonical(nodes)[:3], false)

	// Even forced: the nodes that did not restart are in use.
	err = newRedlock(t, addrs, opts...).Bootstrap(ctx, redlock.Force())
	if err == nil {
		t.Errorf("Bootstrap admitted nodes that restarted empty while a lease was held")
	} else if !errors.Is(err, redlock.ErrInUse) || errors.Is(err, locker.ErrInvalid) {
		t.Errorf("Bootstrap = %v, want an error wrapping ErrInUse (a state, not locker.ErrInvalid)", err)
	}
	notGrantedWhileValid(t, newRedlock(t, addrs, opts...), "k", lease, maxTTL)
}

// TestRestartWithStaleMarker is item 2: three nodes restart from a
// snapshot taken before H acquired k, so their marker comes back and k
// does not. G, which read the nodes' run_id a moment before, must see
// that the servers changed.
func TestRestartWithStaleMarker(t *testing.T) {
	const maxTTL = 3 * time.Second
	nodes, addrs := fresh(t, 5, redisOptions{})
	opts := []redlock.Option{redlock.WithMaxTTL(maxTTL)}
	h, g := newRedlock(t, addrs, opts...), newRedlock(t, addrs, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range canonical(nodes)[:3] {
		if err := direct(t, n).Save(ctx).Err(); err != nil { // the marker, and no k
			t.Fatal(err)
		}
	}
	lease, err := h.Acquire(ctx, "k", locker.WithTTL(maxTTL))
	if err != nil {
		t.Fatal(err)
	}
	// G talks to every node just before they restart.
	warm, err := g.Acquire(ctx, "warm", locker.WithTTL(maxTTL))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	restartAll(t, canonical(nodes)[:3], true)
	notGrantedWhileValid(t, g, "k", lease, maxTTL)
}

// TestDataLossWithoutRestart is item 3: FLUSHALL on three nodes while H
// holds k. Their processes have been up for a long time; the quarantine
// must start when the loss is detected.
func TestDataLossWithoutRestart(t *testing.T) {
	const maxTTL = 2 * time.Second
	nodes, addrs := fresh(t, 5, redisOptions{})
	opts := []redlock.Option{redlock.WithMaxTTL(maxTTL)}
	h, g := newRedlock(t, addrs, opts...), newRedlock(t, addrs, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The nodes have served one max TTL since they started, so the
	// process uptime says nothing.
	await(t, time.Minute, "uptime of one max TTL", func() bool {
		info, err := direct(t, nodes[0]).Info(ctx, "server").Result()
		v, _ := infoField(info, "uptime_in_seconds")
		up, _ := strconv.Atoi(v)
		return err == nil && time.Duration(up)*time.Second > maxTTL
	})
	lease, err := h.Acquire(ctx, "k", locker.WithTTL(maxTTL))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range canonical(nodes)[:3] {
		if err := direct(t, n).FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	notGrantedWhileValid(t, g, "k", lease, maxTTL)
}

// TestEvictingNodeRefused is item 3's other half: a node that may evict
// lock keys while it keeps its marker (maxmemory with a policy other than
// noeviction) is not admitted, and the error names the policy.
func TestEvictingNodeRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := forTest(t).Redis(ctx, 3, redisOptions{Config: [][]string{{"maxmemory", "64mb"}, {"maxmemory-policy", "volatile-lru"}}})
	if err != nil {
		t.Fatal(err)
	}
	addrs := []string{nodes[0].Addr(), nodes[1].Addr(), nodes[2].Addr()}
	err = newRedlock(t, addrs).Bootstrap(ctx)
	if err == nil || !strings.Contains(err.Error(), "volatile-lru") || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("Bootstrap on nodes that evict = %v, want a refusal naming volatile-lru and noeviction", err)
	}
}

// TestLargestMaxTTLWins is item 4: A takes leases of up to 4 s, B of up
// to 300 ms. When three nodes restart empty, B must keep them out for A's
// max TTL, not its own.
func TestLargestMaxTTLWins(t *testing.T) {
	const long, short = 4 * time.Second, 300 * time.Millisecond
	nodes, addrs := fresh(t, 5, redisOptions{})
	a := newRedlock(t, addrs, redlock.WithMaxTTL(long))
	b := newRedlock(t, addrs, redlock.WithMaxTTL(short))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// B has used the nodes before (it knows them, as a running client does).
	warm, err := b.Acquire(ctx, "warm", locker.WithTTL(short))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lease, err := a.Acquire(ctx, "k", locker.WithTTL(long))
	if err != nil {
		t.Fatal(err)
	}
	restartAll(t, canonical(nodes)[:3], false)
	notGrantedWhileValid(t, b, "k", lease, short)
}

// TestBootstrapAdmitsEveryNode: a Redlock made over new nodes probes each
// on every connection it dials; Bootstrap(Force) then admits them. A probe
// sent before Bootstrap and answered after it ("not admitted") must not
// take the admission back: every node votes in every grant that follows.
// The race is a matter of timing, so the test makes a Redlock over new
// nodes several times (without the fix, one node in two such runs sat out
// a quarantine).
func TestBootstrapAdmitsEveryNode(t *testing.T) {
	const runs, grants = 8, 100
	for run := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		nodes, err := forTest(t).Redis(ctx, 5, redisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addrs := make([]string, len(nodes))
		for i, nd := range nodes {
			addrs[i] = nd.Addr()
		}
		rl := newRedlock(t, addrs)
		if err := rl.Bootstrap(ctx, redlock.Force()); err != nil {
			t.Fatal(err)
		}
		before := make([]int64, len(addrs))
		for i, a := range addrs {
			before[i] = commandStats(t, []string{a})["hsetnx"]
		}
		for range grants {
			lease, err := rl.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for i, a := range addrs {
			// The lean grant's HSETNX: every node is asked for every
			// grant (a loaded machine may send a few to the full path).
			if n := commandStats(t, []string{a})["hsetnx"] - before[i]; n < grants*9/10 {
				t.Errorf("run %d: node %s ran %d lean grants of %d: it did not vote", run, a, n, grants)
			}
		}
	}
}
