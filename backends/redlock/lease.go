package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// hold is the Redlock side of a lease: the key and the random value that
// proves it is ours on each node.
type hold struct {
	r          *Redlock
	key, value string
	left       atomic.Bool // the key's turn has been handed on
}

var (
	_ locker.Holder = (*hold)(nil)
	_ locker.Ender  = (*hold)(nil)
)

// Extend runs the extend script on every node and succeeds when a
// majority still held the key for us, within the new validity.
func (h *hold) Extend(ctx context.Context, ttl time.Duration) (time.Time, error) {
	r := h.r
	if ttl < time.Millisecond || (r.o.quarantine && ttl > r.o.maxTTL) {
		return time.Time{}, locker.Invalidf("extend TTL %v for key %q: must be between 1ms and the max TTL %v", ttl, h.key, r.o.maxTTL)
	}
	if err := r.closed(); err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	calls := r.getCalls()
	defer r.putCalls(calls)
	cmd := appendCommand(nil, "EVALSHA", extendScript.sha, "1", h.key, h.value, strconv.FormatInt(ttl.Milliseconds(), 10))
	ok, notOurs := 0, 0
	exchange(ctx, calls, r.timeout(ttl), func(_ int, c *call) {
		c.req, c.p.want = cmd, 1
	}, func(_ int, c *call) bool {
		switch answer(c) {
		case 1:
			ok++
		case 0:
			notOurs++
		}
		return ok >= r.quorum || notOurs > len(calls)-r.quorum
	})
	ok, notOurs, errs := tally(calls)
	validUntil := start.Add(ttl - time.Duration(float64(ttl)*r.o.drift) - 2*time.Millisecond)
	switch {
	case ok >= r.quorum && time.Now().Before(validUntil):
		return validUntil, nil
	case notOurs > len(r.nodes)-r.quorum:
		return time.Time{}, fmt.Errorf("%w: %q is ours on %d of %d nodes, quorum %d: %w", locker.ErrNotHeld, h.key, ok, len(r.nodes), r.quorum, errors.Join(errs...))
	default:
		return time.Time{}, fmt.Errorf("%q extended on %d of %d nodes, quorum %d: %w", h.key, ok, len(r.nodes), r.quorum, errors.Join(errs...))
	}
}

// Release runs the release script on every node, then hands the key's
// turn to the next goroutine of this process that waits for it.
func (h *hold) Release(ctx context.Context) error {
	defer h.leave()
	calls := h.r.getCalls()
	defer h.r.putCalls(calls)
	ok, notOurs, errs := h.r.release(ctx, calls, h.key, h.value, h.r.o.maxTTL)
	switch {
	case ok == 0 && len(errs) == 0:
		return fmt.Errorf("%w: %q was not ours on any node", locker.ErrNotHeld, h.key)
	case ok+notOurs < h.r.quorum && len(errs) > 0:
		// Fewer than a majority confirmed: the key may still be held.
		return fmt.Errorf("%q released on %d of %d nodes; it stays taken on the others until its TTL: %w", h.key, ok, len(calls), errors.Join(errs...))
	}
	// A majority no longer holds it for us: the key is free (a minority
	// that missed the release lets it expire).
	return nil
}

// Ended hands the key's turn on when the lease expires or is lost.
func (h *hold) Ended(error) { h.leave() }

// leave hands the key's turn on, once, however the lease ended.
func (h *hold) leave() {
	if h.left.CompareAndSwap(false, true) {
		h.r.queue.leave(h.key)
	}
}

// release runs the release script on the calls that are not skipped, and
// returns how many nodes released the key, how many did not hold it for
// value, and the errors of the others.
func (r *Redlock) release(ctx context.Context, calls []call, key, value string, ttl time.Duration) (ok, notOurs int, errs []error) {
	ttlMS := strconv.FormatInt(ttl.Milliseconds(), 10)
	list := key + handoffSuffix
	push := appendCommand(nil, "EVALSHA", releaseScript.sha, "2", key, list, value, "1", ttlMS)
	quiet := appendCommand(nil, "EVALSHA", releaseScript.sha, "2", key, list, value, "0", ttlMS)
	asked, answered := 0, 0
	for i := range calls {
		if !calls[i].skip {
			asked++
		}
	}
	// A release is on no lease's clock: give slow nodes time to answer
	// rather than leave the key taken until its TTL.
	exchange(ctx, calls, max(r.timeout(ttl), releaseTimeout), func(i int, c *call) {
		c.req, c.p.want = quiet, 1
		if i < handoffNodes {
			c.req = push // the nodes waiters block on
		}
	}, func(_ int, c *call) bool {
		if answer(c) >= 0 {
			answered++
		}
		// Once a majority has freed the key (or said it was not ours)
		// others can take it; the rest answer in the background.
		return answered >= r.quorum || answered == asked
	})
	return tally(calls)
}

// releaseTimeout is the least a release waits for each node.
const releaseTimeout = time.Second

// answer returns what a script that answers 1 or 0 answered on the call's
// node, or -1 if it failed.
func answer(c *call) int64 {
	if c.err != nil || len(c.rep) == 0 || c.rep[0].err() != nil {
		return -1
	}
	return c.rep[0].n
}

// tally counts the calls whose script answered 1 (done) and 0 (the key
// was not ours), and collects the errors of the rest, leaving out the
// calls the round did not wait for.
func tally(calls []call) (ok, notOurs int, errs []error) {
	for i := range calls {
		c := &calls[i]
		if c.skip || errors.Is(c.err, errNoReply) {
			continue
		}
		if c.err == nil {
			c.err = c.rep[0].err()
		}
		switch {
		case c.err != nil:
			errs = append(errs, c.nodeErr())
		case c.rep[0].n == 1:
			ok++
		default:
			notOurs++
		}
	}
	return ok, notOurs, errs
}
