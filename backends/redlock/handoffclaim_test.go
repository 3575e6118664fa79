//go:build go1.25

package redlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// A key a waiter claims with a try (handed or reserved to it on some of
// its queue nodes, or free there, but not told by a quorum) lives on
// every node that answers, as a handed one does: where the try found
// another value (a release on its way, a try that fails), the waiter
// takes the key once a quorum granted it.

// TestClaimedKeyOnEveryNode: a stray value sits on some nodes for a
// minute, and a brief one (a few hundred milliseconds) on others, a
// majority together, so that the waiter is refused and queues; once the
// brief value has expired, its try is granted by a quorum, and the key
// must then hold its value on all five nodes (each with the grant's
// record), the stray nodes included, and be freed on all five by its
// release. Without a brief value, the stray ones on a minority, the
// Acquire's first try (on the lean path) is granted by a quorum, and the
// same holds: the other nodes pause their clients' writes for a moment
// (CLIENT PAUSE) as the try is sent, so that it reads the stray values
// before its quorum (a lean grant does not wait for the answers that come
// after it). With fencing tokens, the same, and the next grant's token
// must be above the first's, whatever the nodes where the key was taken
// counted.
func TestClaimedKeyOnEveryNode(t *testing.T) {
	if *quorumFirst {
		t.Skip("WithQuorumFirst sets a key on a quorum of the nodes only, claimed or not")
	}
	const ttl = 5 * time.Second
	for _, tc := range []struct {
		name string
		key  string
		// stray and brief pick the nodes of each value from the key's
		// queue nodes (three) followed by the others (two).
		stray, brief []int
		fenced       bool // with fencing tokens
	}{
		{name: "on both other nodes", key: "claim:others", stray: []int{3, 4}, brief: []int{0}},
		{name: "on one other node", key: "claim:other", stray: []int{3}, brief: []int{0, 1}},
		{name: "on a queue node and another", key: "claim:mixed", stray: []int{2, 3}, brief: []int{0}},
		{name: "lean, on both other nodes", key: "lean:others", stray: []int{3, 4}},
		{name: "lean, on a queue node and another", key: "lean:mixed", stray: []int{0, 4}},
		{name: "fenced, on both other nodes", key: "fenced:others", stray: []int{3, 4}, brief: []int{0}, fenced: true},
		{name: "fenced lean, on a queue node and another", key: "fencedlean:mixed", stray: []int{0, 4}, fenced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, addrs := fresh(t, 5, redisOptions{})
			// A node timeout above the pause below.
			w := newRedlock(t, addrs, redlock.WithNodeTimeout(time.Second), redlock.WithFencing(tc.fenced))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// A first grant raises the max TTL recorded on the nodes to
			// the Redlock's: the next try takes the lean path.
			warm, err := w.Acquire(ctx, "warm", locker.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}
			queue := queueNodes(nodes, tc.key)
			order := slices.Clone(queue)
			for _, n := range canonical(nodes) {
				if !slices.Contains(queue, n) {
					order = append(order, n)
				}
			}
			for _, i := range tc.stray {
				if err := direct(t, order[i]).Set(ctx, tc.key, "stray", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range tc.brief {
				if err := direct(t, order[i]).Set(ctx, tc.key, "brief", 300*time.Millisecond).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var lease locker.Lease
			if len(tc.brief) == 0 {
				for i, n := range order {
					if slices.Contains(tc.stray, i) {
						continue
					}
					if err := direct(t, n).Do(ctx, "CLIENT", "PAUSE", "100", "WRITE").Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			lease, err = w.Acquire(ctx, tc.key, locker.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			values := make([]string, len(order))
			for i, n := range order {
				values[i], _ = direct(t, n).Get(ctx, tc.key).Result()
			}
			// The value on the first node that had neither: the try's.
			var want string
			for i, v := range values {
				if !slices.Contains(tc.stray, i) && !slices.Contains(tc.brief, i) {
					want = v
					break
				}
			}
			if want == "" || want == "stray" || want == "brief" {
				t.Fatalf("the nodes hold %q after the grant: no value of the waiter's", values)
			}
			for i, v := range values {
				if v != want {
					t.Errorf("%s (stray %v) holds %q, want the claimed value %q on every node", order[i].Name,
						slices.Contains(tc.stray, i), v, want)
				}
				rec, err := direct(t, order[i]).HGet(ctx, redlock.DefaultKeyPrefix+"node", tc.key).Result()
				if err != nil || !strings.HasSuffix(rec, " "+want) {
					t.Errorf("%s: the grant's record is %q (%v), want one naming %q", order[i].Name, rec, err, want)
				}
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for _, n := range order {
				if k, err := direct(t, n).Exists(ctx, tc.key).Result(); err != nil || k != 0 {
					t.Errorf("%s still has the key after the release (%d, %v)", n.Name, k, err)
				}
			}
			if !tc.fenced {
				return
			}
			// The next grant's token is above this one, whichever nodes'
			// counters gave it.
			next, err := w.Acquire(ctx, tc.key, locker.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer next.Release(ctx)
			a, okA := lease.Token()
			b, okB := next.Token()
			if !okA || !okB || b <= a {
				t.Errorf("tokens %d (%v) then %d (%v): not increasing", a, okA, b, okB)
			}
		})
	}
}

// TestNoLeanTryAfterAHandOff: a client whose release handed the key to a
// waiter asks for it again at once. Its try takes the full path, which
// queues behind the waiters and awaits every node's answer, not the lean
// one, which grants on the quorum it read: the nodes run no lean grant's
// HSETNX for it.
func TestNoLeanTryAfterAHandOff(t *testing.T) {
	if *quorumFirst {
		t.Skip("WithQuorumFirst takes no lean path")
	}
	nodes, a := fresh(t, 5, redisOptions{})
	h, w := newRedlock(t, a), newRedlock(t, a)
	const key = "after"
	lease, _ := handedLease(t, h, w, nodes, key, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before := leanGrants(ctx, t, nodes)
	again, err := h.Acquire(ctx, key, locker.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if after := leanGrants(ctx, t, nodes); after != before {
		t.Errorf("the nodes ran %d lean grants for the Acquire after a hand-off: a lean try", after-before)
	}
}

// leanGrants returns how many HSETNX the nodes have run (INFO
// commandstats), summed: only the lean grant sends it.
func leanGrants(ctx context.Context, t *testing.T, nodes []*server) int {
	t.Helper()
	total := 0
	for _, n := range nodes {
		info, err := direct(t, n).Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		v, _ := infoField(info, "cmdstat_hsetnx")
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		k, _ := strconv.Atoi(calls)
		total += k
	}
	return total
}
