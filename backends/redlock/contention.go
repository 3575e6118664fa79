package redlock

import (
	"slices"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Contention: how waiters pace their attempts. Clients that want a free
// key at the same moment (it expired, or a reservation lapsed) can split
// the vote so that nobody has a majority; they all give back what they
// got, and since every node then queues the same waiters (see
// acquire.lua), every node hands the key to the same first one.

// pacing paces an Acquire's attempts: by its retry strategy, except that
// a waiter queued on the nodes, which a release will wake, waits until
// the key would expire on a majority (in case its holder died and never
// releases it) rather than poll the nodes meanwhile; and that no wait
// exceeds waitRefresh, so that a waiter renews its place in the queues
// in time.
type pacing struct {
	s locker.RetryStrategy
	a *attempt
}

// Backoff implements locker.RetryStrategy.
func (p pacing) Backoff(n int) (time.Duration, bool) {
	d, ok := p.s.Backoff(n)
	return min(max(d, p.a.pause), waitRefresh), ok
}

// expiry returns, after a refusal by holders, how long until the key
// expires on enough nodes to make a quorum, if nobody releases it; 0 when
// the refusal was not (only) theirs, the attempt does not queue, or no
// release can wake it (none of the key's queue nodes answered).
func (a *attempt) expiry() time.Duration {
	if !a.queue || !a.wakeable() {
		return 0
	}
	var left []int64
	for i, s := range a.state {
		if s == held {
			left = append(left, a.token[i])
		}
	}
	// The nodes not held by others are free once this try's release ran.
	k := a.r.quorum - 1 - (len(a.state) - len(left))
	if k < 0 {
		return 0
	}
	slices.Sort(left)
	return time.Duration(left[k]) * time.Millisecond
}

// wakeable reports whether a release can wake the attempt: some queue
// node of its key answered this try (it queued the attempt, or granted).
func (a *attempt) wakeable() bool {
	for i, s := range a.state {
		if (s == held || s == granted) && a.r.queues(a.home, i) {
			return true
		}
	}
	return false
}
