//go:build go1.25

package redlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// TestNodeHangsMidRun: with WithQuorumFirst a try asks a quorum first
// (the key's queue nodes), so a node among them that hangs while a
// client runs costs the tries that were waiting for it up to the node
// timeout, once: after that the node is not answering and the tries ask
// the others first. (By default every node is asked, and a hung minority
// costs no try anything.)
func TestNodeHangsMidRun(t *testing.T) {
	nodes, addrs := fresh(t, 5, redisOptions{})
	rl := newRedlock(t, addrs, redlock.WithQuorumFirst(true))
	const key, ttl = "k", 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := func() time.Duration {
		start := time.Now()
		lease, err := rl.Acquire(ctx, key, locker.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	for range 200 {
		op()
	}
	hung := queueNodes(nodes, key)[0]
	if err := hung.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Resume() })
	var took, slow []time.Duration
	for stop := time.Now().Add(2 * time.Second); time.Now().Before(stop); {
		d := op()
		took = append(took, d)
		if d > 10*time.Millisecond {
			slow = append(slow, d.Round(time.Millisecond))
		}
	}
	slices.Sort(took)
	median, worst := took[len(took)/2], took[len(took)-1]
	t.Logf("after one of the key's queue nodes hung: %d Acquire+Release, median %v, worst %v; over 10 ms: %v", len(took), median, worst.Round(time.Millisecond), slow)
	// The node timeout for a 2 s TTL is 40 ms (see Redlock.timeout).
	if median >= 40*time.Millisecond {
		t.Errorf("median %v: the tries keep waiting for the hung node", median)
	}
	// Waiting for the connection to be given up and redialled takes a
	// second at least.
	if worst >= time.Second {
		t.Errorf("an Acquire+Release took %v: it waited for the hung node's connection", worst)
	}
}
