//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// The double grants an adopter found (issue 19, §2): in each, a holder's
// lease is valid while a majority of the nodes forgets it, and nobody
// else may be granted the key before the lease ends.

// TestEvictionSwitchedOnAtRuntime: five nodes admitted (noeviction), A
// holds a key; then three nodes are told to evict (maxmemory just above
// their use, volatile-ttl) and filled with keys of a long TTL, which
// evicts A's key and keeps the admission marker. Neither a client
// connected before (B) nor one connected after (C) may be granted the key
// while A's lease is valid.
func TestEvictionSwitchedOnAtRuntime(t *testing.T) {
	const ttl = 5 * time.Second
	nodes, addrs := fresh(t, 5, redisOptions{})
	a, b := newRedlock(t, addrs), newRedlock(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// B has talked to every node before the eviction starts.
	warm, err := b.Acquire(ctx, "warm", locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "job:nightly"
	lease, err := a.Acquire(ctx, key, locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range canonical(nodes)[:3] {
		evict(ctx, t, n, key)
	}
	notGrantedWhileValid(t, b, key, lease, ttl)
	if time.Until(lease.ValidUntil()) > 0 {
		t.Fatal("the holder's lease is still valid after the check")
	}
	// A client that connects after the eviction is refused too: its
	// connections find the nodes evicting.
	c := newRedlock(t, addrs)
	_, err = c.TryAcquire(ctx, "other", locker.WithTTL(ttl))
	if !errors.Is(err, locker.ErrNotAcquired) || !strings.Contains(err.Error(), "volatile-ttl") {
		t.Fatalf("a new client on three evicting nodes = %v, want ErrNotAcquired naming the policy", err)
	}
	// Eviction switched off again: the nodes evicted keys since they were
	// admitted, so they serve a quarantine before they vote again.
	for _, n := range canonical(nodes)[:3] {
		if err := direct(t, n).ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
			t.Fatal(err)
		}
	}
	// What the contract promises is that nothing is granted, and that the
	// refusal carries the nodes' causes (a NodeError each, hence
	// ErrUnavailable): not which client's probe detected the loss first.
	_, err = newRedlock(t, addrs).TryAcquire(ctx, "other", locker.WithTTL(ttl))
	if !errors.Is(err, locker.ErrNotAcquired) || !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("a new client on nodes that evicted keys since their admission = %v, want ErrNotAcquired with the nodes' causes", err)
	}
	t.Log(err)
}

// evict switches eviction on at n (maxmemory 300 KB above what it uses,
// maxmemory-policy volatile-ttl) and writes keys with a TTL of an hour
// until key is gone, checking that the node's admission marker stays.
// Redis evicts the key with the least TTL among those it samples, so how
// many writes it takes to evict key varies: evict checks after every
// hundred, up to 20,000.
func evict(ctx context.Context, t *testing.T, n *server, key string) {
	t.Helper()
	c := direct(t, n)
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := infoField(info, "used_memory")
	used, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("used_memory %q: %v", v, err)
	}
	for _, kv := range [][2]string{{"maxmemory", strconv.Itoa(used + 300<<10)}, {"maxmemory-policy", "volatile-ttl"}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	filler := strings.Repeat("x", 200)
	exists, written := int64(1), 0
	for ; exists != 0 && written < 20000; written += 100 {
		p := c.Pipeline()
		for i := written; i < written+100; i++ {
			p.Set(ctx, fmt.Sprintf("filler:%d", i), filler, time.Hour)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if exists, err = c.Exists(ctx, key).Result(); err != nil {
			t.Fatal(err)
		}
	}
	if exists != 0 {
		t.Fatalf("%s: the lock key was not evicted after %d writes: the fault did not happen", n.Name, written)
	}
	keys, err := c.Keys(ctx, "\x00redlock:node*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("%s: the admission marker was evicted too (%v, %v): not the fault under test", n.Name, keys, err)
	}
	info, _ = c.Info(ctx, "stats").Result()
	evicted, _ := infoField(info, "evicted_keys")
	t.Logf("%s: %s keys evicted in %d writes, %q among them, the marker kept", n.Name, evicted, written, key)
}

// TestMixedMaxTTLsAndAPartition: A (max TTL 6 s) holds a key for 5 s;
// three nodes restart empty and the other two stop answering (SIGSTOP),
// so the records of A's max TTL are either lost or out of reach. B (max
// TTL 500 ms), which cannot read them, must not quarantine the restarted
// nodes for its own max TTL only and be granted the key while A holds it.
func TestMixedMaxTTLsAndAPartition(t *testing.T) {
	const long, short, ttl = 6 * time.Second, 500 * time.Millisecond, 5 * time.Second
	nodes, addrs := fresh(t, 5, redisOptions{})
	a := newRedlock(t, addrs, redlock.WithMaxTTL(long))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := a.Acquire(ctx, "k", locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	ordered := canonical(nodes)
	restartAll(t, ordered[:3], false)
	for _, n := range ordered[3:] {
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Resume() })
	}
	b := newRedlock(t, addrs, redlock.WithMaxTTL(short))
	notGrantedWhileValid(t, b, "k", lease, short)
}

// TestEveryNodeRestartedOneByOne: all five nodes restart empty, 200 ms
// apart, while A holds a key; then a new client calls Bootstrap, as one
// that takes the nodes for new would. Bootstrap must not admit them
// (they have been up for less than the max TTL) unless forced, and nobody
// may be granted the key while A's lease is valid. The restarts begin
// 200 ms apart without waiting for each other, and the lease is long:
// one after the other, on a loaded machine, they outlasted a lease of
// 5 s, and nothing was left to test; at once, under two busy loops and
// -race, they (and A's Acquire) once outlasted 8 s.
func TestEveryNodeRestartedOneByOne(t *testing.T) {
	const maxTTL, ttl = 16 * time.Second, 15 * time.Second
	nodes, addrs := fresh(t, 5, redisOptions{})
	opts := []redlock.Option{redlock.WithMaxTTL(maxTTL)}
	a := newRedlock(t, addrs, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := a.Acquire(ctx, "k", locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Restart(ctx, false) })
		<-tick.C
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if !time.Now().Before(lease.ValidUntil()) {
		t.Fatalf("the restarts outlasted A's lease of %v: nothing left to test", ttl)
	}
	c := newRedlock(t, addrs, opts...)
	if err := c.Bootstrap(ctx); err == nil {
		t.Errorf("Bootstrap admitted five nodes restarted empty %v ago, while a lease was valid", time.Until(lease.ValidUntil()))
	} else {
		t.Logf("Bootstrap refused: %v", err)
	}
	notGrantedWhileValid(t, c, "k", lease, ttl)
}
