package redlock

import (
	"context"
	"slices"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Contention: clients that want a free key at the same moment (it
// expired, or a reservation lapsed) can split the vote so that nobody has
// a majority. Rather than all back off and try again in lockstep, the
// client that holds the first node that answered finishes the vote.

// splitWon reports a split vote that this client should finish: nobody
// has a majority, this client holds the first node that answered (the
// tie-breaker every client agrees on), and the nodes held by others could
// still make up its quorum once their holders, who lost the tie-breaker,
// release them.
func (a *attempt) splitWon() bool {
	g, h := a.count(granted), a.count(held)
	if g+h < a.r.quorum || h >= a.r.quorum {
		return false
	}
	for i := range a.state {
		switch a.state[i] {
		case granted:
			return true
		case held:
			return false
		}
	}
	return false
}

// claim re-asks the nodes held by others after a won split vote, waking
// when they are handed to it, for a bounded share of the TTL.
func (a *attempt) claim(ctx context.Context) {
	a.watch()
	budget := a.start.Add(min(a.o.TTL/2, 20*a.r.timeout(a.o.TTL)))
	backoff := 250 * time.Microsecond
	timer := time.NewTimer(backoff)
	defer timer.Stop()
	for a.count(granted) < a.r.quorum && a.count(granted)+a.count(held) >= a.r.quorum {
		if !time.Now().Add(backoff).Before(budget) {
			return
		}
		timer.Reset(backoff)
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		case <-timer.C:
		}
		backoff = min(2*backoff, 4*time.Millisecond)
		a.ask(ctx, func(i int) bool { return a.state[i] == held })
	}
}

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
// the refusal was not (only) theirs, or the attempt does not queue.
func (a *attempt) expiry() time.Duration {
	if !a.queue {
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
