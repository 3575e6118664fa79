//go:build go1.25

package redlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/locker"
)

// TestHungNodesAtStart (issue 19, §3): nodes that accept connections
// and answer nothing (SIGSTOP) when a Redlock starts must not cost its
// Acquires their dial timeout (the first Acquire waited it out), nor a
// grace period each (every Acquire paid 100 ms until the dials ended).
func TestHungNodesAtStart(t *testing.T) {
	const dialTimeout = 20 * time.Second // what the bugs cost: far above any bound below
	for _, hung := range []int{1, 2} {
		t.Run(map[int]string{1: "one hung", 2: "first two hung"}[hung], func(t *testing.T) {
			nodes, addrs := fresh(t, 5, redisOptions{})
			for _, n := range canonical(nodes)[:hung] {
				if err := n.Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { n.Resume() })
			}
			rl := redlockOver(t, newClients(addrs, func(o *redis.Options) { o.DialTimeout = dialTimeout }))
			ctx, cancel := context.WithTimeout(context.Background(), dialTimeout/2)
			defer cancel()
			var took []time.Duration
			for i := range 30 {
				start := time.Now()
				lease, err := rl.Acquire(ctx, "k", locker.WithTTL(time.Second))
				if err != nil {
					t.Fatalf("Acquire %d with %d of 5 nodes hung: %v", i, hung, err)
				}
				took = append(took, time.Since(start))
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			first := took[0]
			slices.Sort(took)
			median := took[len(took)/2]
			t.Logf("%d of 5 nodes hung: first Acquire %v, median %v", hung, first.Round(time.Millisecond), median.Round(time.Millisecond))
			if first > dialTimeout/4 {
				t.Errorf("the first Acquire took %v: it waited for the hung nodes' dials", first)
			}
			if median >= 100*time.Millisecond {
				t.Errorf("Acquires took %v (median): each one waited for the hung nodes", median)
			}
		})
	}
}
