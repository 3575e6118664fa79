package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
	handoff    string // the value of a hand-off to the Acquire it came from, which it frees too (see release.lua)
	ttl        time.Duration
	on         []bool      // the nodes that may hold the key for us: Extend and Release ask them
	lean       bool        // granted on the lean path: its release may sweep records (see sweepBatch)
	left       atomic.Bool // the key's turn has been handed on
	ended      atomic.Bool // the lease ended other than by Release
	lease      *locker.Handle
}

// unconfirmed is the error of a release that fewer than a majority of the
// nodes confirmed: the key may stay taken until its TTL, unless a retry
// (in the background at once, and by Close) reaches them.
var errUnconfirmed = errors.New("the release did not reach a majority of the nodes: the key may stay taken until its TTL; it is retried " +
	"in the background and by Close")

var (
	_ locker.Holder = (*hold)(nil)
	_ locker.Ender  = (*hold)(nil)
)

// Extend runs the extend script on every node and succeeds when a
// majority still held the key for us, within the new validity. If the
// lease ended while the extension was on its way (it expired, say), the
// nodes that extended it hold the key for nobody: it is given back.
func (h *hold) Extend(ctx context.Context, ttl time.Duration) (time.Time, error) {
	r := h.r
	if ttl < time.Millisecond {
		return time.Time{}, locker.Invalidf("extend TTL %v for key %q: Redis expires in whole milliseconds", ttl, h.key)
	}
	if r.c.quarantine && ttl > r.c.maxTTL {
		return time.Time{}, locker.Invalidf("extend TTL %v for key %q: above the max TTL %v that the restart quarantine covers (raise it with "+
			"WithMaxTTL)", ttl, h.key, r.c.maxTTL)
	}
	if err := r.begin(); err != nil {
		return time.Time{}, fmt.Errorf("extend %q: %w", h.key, err)
	}
	defer r.ops.Done()
	start := time.Now()
	ctx, span := r.tel.start(ctx, "redlock.Extend", h.key)
	until, err := h.extend(ctx, ttl)
	r.tel.measure(ctx, r.tel.extend, start, err)
	r.tel.end(span, err)
	return until, err
}

func (h *hold) extend(ctx context.Context, ttl time.Duration) (time.Time, error) {
	r := h.r
	start := r.now()
	calls := r.getCalls()
	defer r.putCalls(calls)
	for i := range calls {
		calls[i].skip = !h.on[i]
	}
	cmd := appendCommand(nil, "EVALSHA", extendScript.sha, "2", h.key, r.k.node, h.value,
		strconv.FormatInt(ttl.Milliseconds(), 10), flag(r.c.quarantine))
	ok, notOurs := 0, 0
	exchange(ctx, calls, r.timeout(ttl), r.quorum, func(_ int, c *call) {
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
	if ok > 0 && h.ended.Load() {
		h.giveBack()
	}
	validUntil := start.Add(ttl - time.Duration(float64(ttl)*r.c.drift) - 2*time.Millisecond)
	switch {
	case ok >= r.quorum && r.now().Before(validUntil):
		return r.validUntil(validUntil), nil
	case notOurs > len(r.nodes)-r.quorum:
		return time.Time{}, withCauses(fmt.Errorf("%w: %q is ours on %d of %d nodes, quorum %d", locker.ErrNotHeld, h.key, ok,
			len(r.nodes), r.quorum), errs)
	case ok >= r.quorum:
		return time.Time{}, fmt.Errorf("%w: %q extended on %d of %d nodes, but only after its new validity had "+
			"passed", locker.ErrUnavailable, h.key, ok, len(r.nodes))
	default:
		return time.Time{}, withCauses(fmt.Errorf("%w: %q extended on %d of %d nodes, quorum "+
			"%d", locker.ErrUnavailable, h.key, ok, len(r.nodes), r.quorum), errs)
	}
}

// withCauses appends the joined per-node causes to err, if any.
func withCauses(err error, causes []error) error {
	if len(causes) == 0 {
		return err
	}
	return fmt.Errorf("%w: %w", err, errors.Join(causes...))
}

// Release runs the release script on every node, then hands the key's
// turn to the next goroutine of this process that waits for it. A
// release that fewer than a majority of the nodes confirmed (its context
// ended first, the nodes were unreachable) returns an error that says so
// and wraps the causes (ctx.Err(), locker.ErrUnavailable), the lease's
// Err says so too, and the release is retried at once in the
// background, and again by Close if that failed too.
func (h *hold) Release(ctx context.Context) error {
	defer h.leave()
	r := h.r
	if err := r.begin(); err != nil {
		return fmt.Errorf("release %q: %w", h.key, err) // Close releases it
	}
	defer r.ops.Done()
	start := time.Now()
	ctx, span := r.tel.start(ctx, "redlock.Release", h.key)
	err := h.release(ctx)
	r.tel.measure(ctx, r.tel.release, start, err)
	r.tel.end(span, err)
	return err
}

func (h *hold) release(ctx context.Context) error {
	r := h.r
	calls := h.calls()
	defer r.putCalls(calls)
	ok, notOurs, errs := h.releaseAll(ctx, calls)
	switch {
	case ok == 0 && len(errs) == 0:
		r.holds.remove(h)
		return fmt.Errorf("%w: %q was not ours on any node", locker.ErrNotHeld, h.key)
	case !r.freed(calls, ok, notOurs) && len(errs) > 0:
		// Fewer than a majority confirmed: the key may still be held.
		// Retry now, within releaseTimeout, and leave the hold to Close
		// if that fails too.
		err := fmt.Errorf("%w: %q released on %d of %d nodes: %w: %w", locker.ErrUnavailable, h.key, ok, len(calls),
			errUnconfirmed, errors.Join(errs...))
		r.event(eventUnconfirmed, "", err, slog.String("key", h.key))
		r.background(func() { h.giveBack() })
		return err
	}
	// A majority no longer holds it for us: the key is free (a minority
	// that missed the release lets it expire).
	r.holds.remove(h)
	return nil
}

// Ended hands the key's turn on when the lease ends other than by
// Release (it expired, was lost, or Close ended it), and gives the key
// back: an expired lease may still hold it on the nodes for a few
// milliseconds (its drift allowance), or for a whole TTL if an extension
// reached them after the lease ended.
func (h *hold) Ended(error) {
	h.ended.Store(true)
	h.leave()
	if h.r.closed() == nil { // else Close gives it back
		h.r.background(h.giveBack)
	}
}

// giveBack releases the key on every node, within releaseTimeout, once
// its lease has ended, and forgets the hold once a majority confirmed it
// (or said the key was no longer ours); Close gives back the others again.
func (h *hold) giveBack() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	calls := h.calls()
	defer h.r.putCalls(calls)
	ok, notOurs, _ := h.releaseAll(ctx, calls)
	if h.r.freed(calls, ok, notOurs) {
		h.r.holds.remove(h)
	}
}

// releaseAll releases the key on the calls not skipped; one granted on
// the lean path sweeps records too, as a grant of the full path does:
// sweepBatch of them, one time in sweepBatch.
func (h *hold) releaseAll(ctx context.Context, calls []call) (ok, notOurs int, errs []error) {
	return h.r.release(ctx, calls, releaseRequest{key: h.key, value: h.value, also: h.handoff,
		reserve: h.r.reserveFor(h.ttl), sweep: h.lean && rand.IntN(sweepBatch) == 0}, true)
}

// sweepBatch is how many records a release that sweeps looks at (see
// release.lua). A full grant looks at one each time; a lean one at none,
// and one release in sweepBatch of a lean lease looks at sweepBatch: as
// many records over many grants, for a fraction of the commands.
const sweepBatch = 8

// calls returns the calls of a release of h: to the nodes that may hold
// the key for it, and to the key's queue nodes, where it may be queued.
func (h *hold) calls() []call {
	calls := h.r.getCalls()
	home := h.r.home(h.key)
	for i := range calls {
		calls[i].skip = !h.on[i] && !h.r.queues(home, i)
	}
	return calls
}

// freed reports whether, after a release that ok nodes confirmed and
// notOurs found not ours, too few nodes may still hold the key for a
// quorum against anyone else: it is free.
func (r *Redlock) freed(calls []call, ok, notOurs int) bool {
	asked := 0
	for i := range calls {
		if !calls[i].skip {
			asked++
		}
	}
	return asked-ok-notOurs <= len(r.nodes)-r.quorum
}

// leave hands the key's turn on, once, however the lease ended.
func (h *hold) leave() {
	if h.left.CompareAndSwap(false, true) {
		h.r.queue.leave(h.key)
	}
}

// release runs the release script on the calls that are not skipped, and
// returns how many nodes released the key, how many did not hold it for
// value, and the errors of the others. A node whose key has waiters
// reserves it for the first of them for reserve, and the key's queue
// nodes wake that waiter. With dequeue, this Redlock also
// leaves the key's queue (a holder's release: its place is stale); a
// failed attempt that releases what it got keeps its place.
func (r *Redlock) release(ctx context.Context, calls []call, rel releaseRequest, dequeue bool) (ok, notOurs int, errs []error) {
	if dequeue {
		rel.id = r.id
	}
	asked, answered, released := 0, 0, 0
	handedOn := false
	for i := range calls {
		if !calls[i].skip {
			asked++
		}
	}
	rel.r, rel.home = r, r.home(rel.key)
	// A release is on no lease's clock: give slow nodes time to answer
	// rather than leave the key taken until its TTL.
	// It wakes once the nodes that have not answered are too few for a
	// quorum against anyone else.
	exchange(ctx, calls, releaseTimeout, max(asked-(len(r.nodes)-r.quorum), 1), rel.build, func(_ int, c *call) bool {
		switch n := answer(c); n {
		case 1, 2: // released, released and reserved for a waiter
			released++
			answered++
			handedOn = handedOn || n == 2
		case 0: // not ours
			answered++
		}
		// Once enough nodes have freed the key (or said it was not ours)
		// others can take it, and the rest answer in the background —
		// unless none of those that answered held it for us: "not held"
		// takes a majority of the nodes asked saying so.
		return asked-answered <= len(r.nodes)-r.quorum && (released > 0 || answered >= min(asked, r.quorum))
	})
	if handedOn {
		// Others wait for the key: this Redlock's next Acquire of it
		// takes the full path, which queues behind them and, when a
		// quorum grants it anyway, awaits every node's answer and takes
		// the key where a waiter has it (see takeHeld), rather than a
		// lean try that keeps the key on the quorum it read.
		r.hot.mark(rel.key, time.Now())
	}
	return tally(calls)
}

// send sends the release script to the calls that are not skipped, to
// free what a failed try may have set, and does not wait for the answers.
func (r *Redlock) send(ctx context.Context, calls []call, key, value string, reserve time.Duration) {
	rel := releaseRequest{r: r, key: key, value: value, reserve: reserve, home: r.home(key)}
	exchange(context.WithoutCancel(ctx), calls, 0, 0, rel.build, func(int, *call) bool { return true })
}

// releaseRequest builds the release script's request to each node.
type releaseRequest struct {
	r          *Redlock
	key, value string
	also       string // another value of ours the key may hold ("" for none)
	id         string // our waiter id, to leave the key's queue; "" to keep our place
	reserve    time.Duration
	home       int
	sweep      bool // sweep expired records (a lease granted on the lean path, now and then)
}

func (q *releaseRequest) build(i int, c *call) {
	r, key := q.r, q.key
	c.p.want = 1
	if !r.queues(q.home, i) && !q.sweep {
		// No waiter queues on this node: a compare-and-delete, with the
		// grant's record (release_lean.lua), does what release.lua would.
		mode := "0"
		if r.c.quarantine {
			mode = "3"
		}
		c.buf = appendCommand(c.buf, "EVALSHA", leanScript.sha, "2", key, r.k.node, q.value, mode, q.also)
		return
	}
	b := appendArray(c.buf, 18)
	b = appendBulk(b, "EVALSHA")
	b = appendBulk(b, releaseScript.sha)
	b = appendBulk(b, "5")
	b = appendBulk(b, key)
	b = appendBulkConcat(b, r.k.waiters, key)
	b = appendBulkConcat(b, r.k.deadlines, key)
	b = appendBulk(b, r.k.node)
	b = appendBulkConcat(b, r.k.asks, key)
	b = appendBulk(b, q.value)
	b = appendBulk(b, r.queueID(q.home, i, q.id))
	b = appendBulk(b, flag(r.queues(q.home, i)))
	b = appendBulkInt(b, q.reserve.Milliseconds())
	b = appendBulk(b, r.k.wake)
	b = appendBulkInt(b, wakeLife.Milliseconds())
	b = appendBulk(b, flag(r.c.quarantine))
	b = appendBulk(b, q.run(c.node))
	b = appendBulk(b, q.also)
	if q.sweep {
		b = appendBulkInt(b, sweepBatch)
	} else {
		b = appendBulk(b, "0")
	}
	c.buf = b
}

// run is the run_id the release tells node n to hand the key over for
// (see release.lua): the server process the node votes for now, as far
// as this client knows; without the restart quarantine, "" (any); and
// one no marker holds when the node does not vote, so that the key is
// only reserved there.
func (q *releaseRequest) run(n *node) string {
	if !q.r.c.quarantine {
		return ""
	}
	run, ok, _ := n.votes(time.Now())
	if !ok || run == "" {
		return "-"
	}
	return run
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
		case c.rep[0].n >= 1:
			ok++
		default:
			notOurs++
		}
	}
	return ok, notOurs, errs
}
