package redlock

import (
	"context"
	"time"
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
