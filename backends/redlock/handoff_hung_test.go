//go:build go1.25

package redlock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// hotKey runs instances Redlocks (as processes would) on one key for d
// and returns the grants per second and the p99 of Acquire+Release.
func hotKey(t *testing.T, addrs []string, key string, instances int, d time.Duration) (float64, time.Duration) {
	t.Helper()
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	rls := make([]*redlock.Redlock, instances)
	for i := range rls {
		rls[i] = newRedlock(t, addrs)
	}
	stop := time.Now().Add(d)
	for _, rl := range rls {
		wg.Go(func() {
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				lease, err := rl.Acquire(ctx, key, locker.WithTTL(2*time.Second))
				if err == nil {
					err = lease.Release(ctx)
				}
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				lats = append(lats, time.Since(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(lats)
	if len(lats) == 0 {
		return 0, 0
	}
	return float64(len(lats)) / d.Seconds(), lats[len(lats)*99/100]
}

// queueNodes returns the nodes that keep key's queue, in the order the
// library places them (see handoff.go: quorum nodes in address order
// from the one FNV-1a of the key picks): part of the layout on the nodes.
func queueNodes(nodes []*server, key string) []*server {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	c := canonical(nodes)
	var q []*server
	for i := range len(c)/2 + 1 {
		q = append(q, c[(int(h%uint32(len(c)))+i)%len(c)])
	}
	return q
}

// TestHungQueueNodes (issue 19, §3): with two of the three nodes that
// keep a hot key's queue hung (SIGSTOP), waiters must still be woken (by
// the third) or fall back to their retry strategy at once. Before, the
// queue and the wake-ups lived on the first nodes by address: with those
// two hung, 4 instances on one hot key fell from 1,450 operations/s to 9.
func TestHungQueueNodes(t *testing.T) {
	nodes, addrs := fresh(t, 5, redisOptions{})
	const key, instances = "hot", 4
	base, baseP99 := hotKey(t, addrs, key, instances, 2*time.Second)
	t.Logf("no fault: %.0f ops/s, p99 %v", base, baseP99.Round(time.Millisecond))
	for _, n := range queueNodes(nodes, key)[:2] {
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Resume() })
	}
	// Before, 0.015x in every window. A loaded machine can halve a window
	// or two; it does not make them all collapse.
	total := 0.0
	for i := range 3 {
		ops, p99 := hotKey(t, addrs, key, instances, 2*time.Second)
		t.Logf("two of the key's queue nodes hung, seconds %d-%d: %.0f ops/s (%.2fx), p99 %v", 2*i, 2*i+2, ops, ops/base, p99.Round(time.Millisecond))
		if ops < base/20 {
			t.Errorf("seconds %d-%d: %.0f ops/s against %.0f without the fault: the waiters wait for the hung nodes", 2*i, 2*i+2, ops, base)
		}
		total += ops
	}
	if mean := total / 3; mean < 0.3*base {
		t.Errorf("%.0f ops/s on average with two of the key's queue nodes hung, against %.0f without: the waiters wait for the hung nodes", mean, base)
	}
}
