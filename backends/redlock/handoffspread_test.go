//go:build go1.25

package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// A key a release hands to a waiter lives on every node that answers, as
// an ordinary grant's does, not on the key's queue nodes only (a bare
// majority): else one queue node that forgets it lets a newcomer take the
// key with the nodes that never had it.

// handedLease makes w wait for key while another Redlock holds it, then
// releases that hold, and returns w's lease and the value handed to it.
// It tries up to five times for a grant that is a hand-off (the value
// starts with "handed:" on a queue node): a waiter that does not learn of
// the hand-off from every queue node in time claims the key with a try
// instead, which sets it everywhere anyway and tests nothing. prepare, if
// any, runs while w waits, before the release. The spread to the other
// nodes is sent, not waited for: a test awaits what it expects there.
func handedLease(t *testing.T, h, w *redlock.Redlock, nodes []*server, key string, ttl time.Duration,
	prepare ...func(),
) (locker.Lease, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queue := queueNodes(nodes, key)
	for range 5 {
		held, err := h.Acquire(ctx, key, locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		granted := make(chan locker.Lease, 1)
		go func() {
			lease, err := w.Acquire(ctx, key, locker.WithTTL(ttl))
			if err != nil {
				t.Error(err)
			}
			granted <- lease
		}()
		// The waiter is queued on every queue node: the release hands it
		// the key there.
		await(t, 10*time.Second, "the waiter queued", func() bool {
			for _, q := range queue {
				if n, err := direct(t, q).ZCard(ctx, redlock.DefaultKeyPrefix+"waiters:"+key).Result(); err != nil || n == 0 {
					return false
				}
			}
			return true
		})
		for _, f := range prepare {
			f()
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lease := <-granted
		if lease == nil {
			t.FailNow()
		}
		first, _ := direct(t, queue[0]).Get(ctx, key).Result()
		if strings.HasPrefix(first, "handed:") {
			return lease, first
		}
		t.Logf("claimed by a try, not handed over (%q): again", first)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("no hand-off in five releases to a waiting client")
	return nil, ""
}

// TestHandedKeyOnEveryNode: after a hand-off the key holds the waiter's
// value on all five nodes, each with the grant's record (the restart
// quarantine's trace of it), and the waiter's release frees all five.
func TestHandedKeyOnEveryNode(t *testing.T) {
	if *quorumFirst {
		t.Skip("WithQuorumFirst sets a key on a quorum of the nodes only, handed or not")
	}
	nodes, a := fresh(t, 5, redisOptions{})
	h, w := newRedlock(t, a), newRedlock(t, a)
	const key = "spread"
	lease, handed := handedLease(t, h, w, nodes, key, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	awaitHeld(ctx, t, nodes, key, handed)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		if n, err := direct(t, nd).Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Errorf("%s still has the key after the release (%d, %v)", nd.Name, n, err)
		}
	}
}

// TestHandedKeySurvivesAQueueNodeForgetting: after a hand-off, one of the
// key's queue nodes forgets it (as a clock jump that expires it early
// would, or an eviction nothing detects). A newcomer must not be granted
// the key while the waiter's lease is valid: it would need the two
// nodes that are not queue nodes, which hold the key too.
func TestHandedKeySurvivesAQueueNodeForgetting(t *testing.T) {
	if *quorumFirst {
		t.Skip("WithQuorumFirst sets a key on a quorum of the nodes only, handed or not")
	}
	const ttl = time.Second
	nodes, a := fresh(t, 5, redisOptions{})
	h, w, n := newRedlock(t, a), newRedlock(t, a), newRedlock(t, a)
	const key = "forget"
	lease, handed := handedLease(t, h, w, nodes, key, ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer lease.Release(ctx)
	awaitHeld(ctx, t, nodes, key, handed)
	if err := direct(t, queueNodes(nodes, key)[1]).Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	notGrantedWhileValid(t, n, key, lease, ttl)
}

// awaitHeld waits until every node holds key with value v and the
// grant's record naming it, and fails t with what a node holds if that
// does not come within 10 s.
func awaitHeld(ctx context.Context, t *testing.T, nodes []*server, key, v string) {
	t.Helper()
	var last string
	held := func() bool {
		for _, n := range nodes {
			got, _ := direct(t, n).Get(ctx, key).Result()
			rec, err := direct(t, n).HGet(ctx, redlock.DefaultKeyPrefix+"node", key).Result()
			if got != v || err != nil || !strings.HasSuffix(rec, " "+v) {
				last = fmt.Sprintf("%s holds %q with the record %q (%v)", n.Name, got, rec, err)
				return false
			}
		}
		return true
	}
	if !poll(10*time.Second, held) {
		t.Fatalf("%s, want the value %q and a record naming it on every node", last, v)
	}
}
