package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Fencing tokens: each node's per-key counter, advanced by the acquire
// script or, on the lean path, by the advance script after the grant's
// SET (both run fence.lua; without the clock floor the lean path
// runs what fence.lua then does, INCR); a grant's token is the highest
// its majority returned, written back until a majority has it.

// floor returns the floor of the tokens of a try that begins at now: its
// clock in µs with the clock floor, else 0.
func (r *Redlock) floor(now time.Time) int64 {
	if !r.c.clockFloor {
		return 0
	}
	return now.UnixMicro()
}

// fence returns the lease's token: the highest the granting nodes
// returned, written back until a majority of nodes has it.
func (a *attempt) fence(ctx context.Context) (int64, error) {
	if !a.r.c.fencing {
		return 0, nil
	}
	var top int64
	for i, s := range a.state {
		if s == granted {
			top = max(top, a.token[i])
		}
	}
	have := 0
	for i, s := range a.state {
		if s == granted && a.token[i] == top {
			have++
		}
	}
	if have >= a.r.quorum {
		return top, nil
	}
	// Raise the granting nodes that returned less.
	for i := range a.calls {
		a.calls[i].skip = !(a.state[i] == granted && a.token[i] < top)
		a.calls[i].extra, a.calls[i].slow = 0, false
	}
	topStr := strconv.FormatInt(top, 10)
	life := strconv.FormatInt(a.r.counterLife().Milliseconds(), 10)
	exchange(ctx, a.calls, a.r.timeout(a.o.TTL), 0, func(_ int, c *call) {
		c.buf = appendCommand(c.buf, "EVALSHA", raiseScript.sha, "1", a.r.k.token+a.key, topStr, life)
		c.p.want = 1
	}, nil)
	var errs []error
	for i := range a.calls {
		c := &a.calls[i]
		if c.skip {
			continue
		}
		if c.err == nil {
			c.err = c.rep[0].err()
		}
		if c.err != nil {
			errs = append(errs, c.nodeErr())
			continue
		}
		have++
	}
	if have < a.r.quorum {
		return 0, fmt.Errorf("fencing token %d reached %d nodes, quorum %d: %w", top, have, a.r.quorum, errors.Join(errs...))
	}
	return top, nil
}
