package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// TestNoNameCollides: the library's own keys (fencing counters, hand-off
// lists, the node marker, wait queues) live where no lock name can reach
// them, so locks with any names can be held at once, and each keeps its
// tokens increasing.
func TestNoNameCollides(t *testing.T) {
	rl := newRedlock(t, addrs, redlock.WithFencing(true), redlock.WithClockFloor(false))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := []string{"x", "x:token", "x:handoff", "redlock:node", "redlock", ""}
	tokens := map[string]uint64{}
	for round := range 3 {
		var leases []locker.Lease
		for _, name := range names[:len(names)-1] {
			lease, err := rl.TryAcquire(ctx, name, locker.WithTTL(10*time.Second))
			if err != nil {
				t.Fatalf("round %d: lock %q while the others are held: %v", round, name, err)
			}
			tok, _ := lease.Token()
			if tok <= tokens[name] {
				t.Errorf("round %d: lock %q: token %d after %d", round, name, tok, tokens[name])
			}
			tokens[name] = tok
			leases = append(leases, lease)
		}
		for i, lease := range leases {
			if err := lease.Release(ctx); err != nil {
				t.Errorf("round %d: release %q: %v", round, names[i], err)
			}
		}
	}
}
