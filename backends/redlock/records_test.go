//go:build go1.25

package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// TestGrantRecordsSwept: the records of locks that expired without a
// release (the restart quarantine's, on each node's state) do not pile
// up: every full grant sweeps one record picked at random if it expired,
// and one release in sweepBatch of a lean grant sweeps sweepBatch, so
// grants and releases of new keys bring 200 expired records down.
func TestGrantRecordsSwept(t *testing.T) {
	nodes, addrs := fresh(t, 3, redisOptions{})
	rl := newRedlock(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Long enough for all of them to be granted before the first expires
	// (then nothing is swept yet), even on a loaded machine.
	const leaked, ttl = 200, 8 * time.Second
	for i := range leaked {
		if _, err := rl.Acquire(ctx, fmt.Sprintf("leak:%d", i), locker.WithTTL(ttl)); err != nil {
			t.Fatal(err)
		}
	}
	c := direct(t, nodes[0])
	before, err := c.HLen(ctx, "\x00redlock:node").Result()
	if err != nil {
		t.Fatal(err)
	}
	if before < leaked/2 {
		t.Fatalf("%d fields on the node's state after %d unreleased grants: the records it sweeps were not written", before, leaked)
	}
	await(t, 2*ttl, "the unreleased locks expire", func() bool {
		n, err := c.Exists(ctx, fmt.Sprintf("leak:%d", leaked-1)).Result()
		return err == nil && n == 0
	})
	for i := range 3 * leaked {
		lease, err := rl.Acquire(ctx, fmt.Sprintf("new:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, err := c.HLen(ctx, "\x00redlock:node").Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fields on the node's state: %d after %d unreleased grants, %d after %d grants and releases of new keys", before, leaked, after, 3*leaked)
	if after > 10 {
		t.Fatalf("%d fields left on the node's state: the expired records were not swept", after)
	}
}
