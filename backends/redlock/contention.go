package redlock

import (
	"slices"
	"sync"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Contention: how waiters pace their attempts. Clients that want a free
// key at the same moment (it expired, or a reservation lapsed) can split
// the vote so that nobody has a majority; they all give back what they
// got, and since every node then queues the same waiters (see
// acquire.lua), every node reserves the key for the same first one.

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

// hotKeys remembers the keys this Redlock recently found contended: held
// by another client, handed to a waiter by its release, or handed to it.
// A try for a hot key asks the key's queue nodes first (a quorum: where a
// reservation is, and where a waiter queues), and the others only if
// those did not make a quorum without a holder: a hand-off then costs
// the nodes three scripts per round instead of five.
type hotKeys struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// hotFor is how long a key stays hot after it was last found contended.
const hotFor = time.Second

// mark records that key was found contended now.
func (h *hotKeys) mark(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil || len(h.last) > 4096 {
		h.last = map[string]time.Time{}
	}
	h.last[key] = time.Now()
}

// hot reports whether key was found contended within hotFor.
func (h *hotKeys) hot(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.last[key]
	return ok && time.Since(t) < hotFor
}

// narrow returns, for a try on a hot key, which nodes to ask first: the
// key's queue nodes, if they are answering; nil to ask every node.
func (a *attempt) narrow() func(int) bool {
	if !a.r.hot.hot(a.key) {
		return nil
	}
	now := time.Now()
	for i, n := range a.r.nodes {
		if a.r.queues(a.home, i) && !n.answering(now) {
			return nil
		}
	}
	return func(i int) bool { return a.r.queues(a.home, i) }
}
