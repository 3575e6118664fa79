package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Acquire implements locker.Locker. Goroutines of this Redlock that want
// the same key queue for it in FIFO order, and only the first talks to
// the servers; when the key is held elsewhere it queues on the nodes too
// (see handoff.go), so a release hands the key to the waiter that began
// waiting first, in any process, and wakes it at once rather than after
// its backoff. It fails at once, with an error wrapping ErrConfig, when
// too many nodes refuse Redlock's configuration for a quorum.
func (r *Redlock) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return r.acquire(ctx, opAcquire, key, opts)
}

// TryAcquire implements locker.Locker: one attempt, and ErrNotAcquired
// at once if another goroutine of this Redlock holds or awaits the key.
// It does not queue on the nodes.
func (r *Redlock) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return r.acquire(ctx, opTryAcquire, key, opts)
}

// acquire runs Acquire or TryAcquire (op), in a span, and measures it.
func (r *Redlock) acquire(ctx context.Context, op int, key string, opts []locker.Option) (locker.Lease, error) {
	o, err := r.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if err := r.begin(); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	defer r.ops.Done()
	start := time.Now()
	ctx, span := r.tel.start(ctx, opNames[op], key)
	var lease locker.Lease
	rounds := 0
	if op == opAcquire {
		lease, rounds, err = r.wait(ctx, key, o)
	} else {
		lease, rounds, err = r.try(ctx, key, o)
	}
	r.tel.acquired(ctx, span, op, start, rounds, lease, err)
	return lease, err
}

// wait is Acquire: attempts paced by the retry strategy and woken by
// hand-offs, until one is granted; and how many rounds it sent.
func (r *Redlock) wait(ctx context.Context, key string, o locker.Options) (locker.Lease, int, error) {
	if err := r.queue.enter(ctx, key, r.ops.Context()); err != nil {
		return nil, 0, fmt.Errorf("acquire %q: %w", key, err)
	}
	r.ready(ctx, false)
	a := r.newAttempt(key, o, true)
	defer r.done(a)
	lease, err := locker.Retry(ctx, pacing{o.Retry, a}, a.wake, func(ctx context.Context) (locker.Lease, error) {
		lease, err := a.run(ctx)
		if errors.Is(err, locker.ErrNotAcquired) {
			a.watch() // from now on, wake on hand-offs (and on Close)
		}
		return lease, err
	})
	if err != nil {
		r.queue.leave(key)
		if a.queued {
			// Give up the place in the queue, and a reservation or a
			// hand-off made for us in the meantime, rather than make the
			// next waiter wait for it to expire.
			handoff := a.handoff
			r.background(func() { r.cede(key, handoff) })
		}
		return nil, a.rounds, err
	}
	return lease, a.rounds, nil
}

// try is TryAcquire: one attempt; and how many rounds it sent.
func (r *Redlock) try(ctx context.Context, key string, o locker.Options) (locker.Lease, int, error) {
	if !r.queue.tryEnter(key) {
		return nil, 0, fmt.Errorf("%w: %q is held by this process", locker.ErrNotAcquired, key)
	}
	r.ready(ctx, false)
	a := r.newAttempt(key, o, false)
	defer r.done(a)
	lease, err := a.run(ctx)
	if err != nil {
		r.queue.leave(key)
		return nil, a.rounds, err
	}
	return lease, a.rounds, nil
}

// resolve checks the key and options.
func (r *Redlock) resolve(key string, opts []locker.Option) (locker.Options, error) {
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		return o, err
	}
	if err := r.k.checkKey(key); err != nil {
		return o, err
	}
	if o.TTL < time.Millisecond {
		return o, locker.Invalidf("TTL %v for key %q: Redis expires in whole milliseconds", o.TTL, key)
	}
	if r.c.quarantine && o.TTL > r.c.maxTTL {
		return o, locker.Invalidf("TTL %v for key %q: above the max TTL %v that the restart quarantine covers (see "+
			"WithMaxTTL)", o.TTL, key, r.c.maxTTL)
	}
	return o, nil
}

// run makes one try: it asks the nodes for the key, and either returns
// a lease held on a majority within its validity, or releases whatever
// it got and returns an error wrapping locker.ErrNotAcquired.
func (a *attempt) run(ctx context.Context) (locker.Lease, error) {
	if err := a.r.closed(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if lease := a.handed(ctx); lease != nil {
		return lease, nil
	}
	a.tries++
	a.begin()
	if a.lean() {
		if lease, err := a.runLean(ctx); lease != nil || err != nil {
			return lease, err
		}
		// Given back: a full try, at once; one that contends (queues
		// even where granted) if the key was held.
		if a.count(held) > 0 {
			a.tries++
		}
		a.begin()
	}
	a.pick()
	a.ask(ctx, func(i int) bool { return a.first[i] })
	if g := a.count(granted); g < a.r.quorum && g+a.spare >= a.r.quorum {
		// A node of the first quorum refused or failed: the others may
		// still make a majority.
		a.spare = 0
		a.ask(ctx, func(i int) bool { return a.state[i] == notAsked })
	}
	if a.count(granted) < a.r.quorum {
		return nil, a.fail(ctx, "")
	}
	if a.rest {
		// A contending try, granted by the nodes it asked first: the
		// key is taken on the others, as a grant of every node would
		// have set it (see contends and spread).
		a.take(ctx, func(i int) bool { return a.state[i] == notAsked }, true)
	}
	a.takeHeld(ctx, a.record)
	token, err := a.fence(ctx)
	if err != nil {
		return nil, a.fail(ctx, err.Error())
	}
	validUntil := a.start.Add(a.o.TTL - a.driftAllowance())
	if now := a.r.now(); !now.Before(validUntil) {
		return nil, a.fail(ctx, fmt.Sprintf("validity exhausted: the grant took %v of a %v TTL",
			now.Sub(a.start).Round(time.Microsecond), a.o.TTL))
	}
	return a.lease(token, validUntil, false), nil
}

// lease returns the lease of the try, granted (on the lean path, or not)
// with token until validUntil, and counts it among the Redlock's holds.
func (a *attempt) lease(token int64, validUntil time.Time, lean bool) locker.Lease {
	h := &hold{r: a.r, key: a.key, value: a.value, ttl: a.o.TTL, on: slices.Clone(a.set), lean: lean}
	if !lean {
		// A hand-off to this Acquire, which only a try that queued can
		// have had, is freed with the key.
		h.handoff = a.handoff
	}
	g := locker.Grant{Key: a.key, Token: uint64(token), HasToken: a.r.c.fencing, ValidUntil: a.r.validUntil(validUntil)}
	h.lease = locker.NewLease(a.r.life, h, g, a.o)
	a.r.holds.add(h)
	return h.lease
}

// ask sends the acquire script to the nodes for which which(i) holds and
// that may vote, and records what each answered.
func (a *attempt) ask(ctx context.Context, which func(int) bool) {
	r := a.r
	now := time.Now()
	floor := r.floor(now)
	for i := range a.calls {
		c := &a.calls[i]
		c.skip = !which(i)
		c.extra, c.slow = r.c.waitTimeout, r.c.waitReplicas > 0
		if c.skip {
			continue
		}
		run, ok, why := c.node.votes(now)
		if !ok {
			c.skip = true
			a.state[i], a.set[i] = excluded, false
			a.cause[i] = &locker.NodeError{Node: c.node.addr, Err: why}
			continue
		}
		a.state[i], a.runs[i] = notAsked, run
		a.slow[i] = !c.node.answering(now)
		// The script may queue the attempt, even where it grants.
		a.queued = a.queued || (a.queue && r.queues(a.home, i))
	}
	a.rounds++
	exchange(ctx, a.calls, r.timeout(a.o.TTL), r.quorum, func(i int, c *call) {
		c.run = a.runs[i]
		c.buf = a.appendAcquire(c.buf, i, c.run, floor, false)
		c.p.want = 1
		if r.c.waitReplicas > 0 {
			c.p.want++
		}
	}, func(i int, c *call) bool {
		a.record(i, c)
		return a.decided()
	})
	for i := range a.calls {
		c := &a.calls[i]
		switch {
		case c.skip || a.state[i] != notAsked:
		case errors.Is(c.err, errNoReply):
			a.state[i], a.set[i] = late, true // it may still set the key
		default: // timed out, or ctx ended
			a.record(i, c)
		}
	}
}

// decided reports whether the round has its answer: a majority granted,
// or too few nodes are left to make one, counting those the try may ask
// next. A waiter that queues on the
// nodes waits for every node it asked (within the node timeout) before it
// gives up — it is in no hurry to learn that it waits, and knowing every
// node's answer spares releasing the nodes that had not answered — but
// not for the nodes that were not answering when the try began (hung, cut
// off, or redialling): their replies, if they come, are read and dropped.
func (a *attempt) decided() bool {
	g, open, awaited := 0, 0, 0
	for i, s := range a.state {
		switch {
		case s == granted:
			g++
		case s == notAsked && !a.calls[i].skip:
			open++ // asked in this round, not answered yet
			if !a.slow[i] {
				awaited++
			}
		}
	}
	return g >= a.r.quorum || (g+open+a.spare < a.r.quorum && (!a.queue || awaited == 0))
}

// appendAcquire appends the acquire script's EVALSHA for this try, for a
// node whose server process is run (and WAIT when asked for), to b; with
// take, the script takes the key whatever value holds it (see spread).
func (a *attempt) appendAcquire(b []byte, i int, run string, floor int64, take bool) []byte {
	r := a.r
	b = appendArray(b, 22)
	b = appendBulk(b, "EVALSHA")
	b = appendBulk(b, acquireScript.sha)
	b = appendBulk(b, "6")
	b = appendBulk(b, a.key)
	b = appendBulkConcat(b, r.k.token, a.key)
	b = appendBulk(b, r.k.node)
	b = appendBulkConcat(b, r.k.waiters, a.key)
	b = appendBulkConcat(b, r.k.deadlines, a.key)
	b = appendBulkConcat(b, r.k.asks, a.key)
	b = appendBulk(b, a.value)
	b = appendBulkInt(b, a.o.TTL.Milliseconds())
	b = appendBulk(b, run)
	b = appendBulkInt(b, r.c.maxTTL.Milliseconds())
	b = appendBulk(b, flag(r.c.fencing))
	b = appendBulkInt(b, floor)
	b = appendBulkInt(b, r.counterLife().Milliseconds())
	if a.queue && r.queues(a.home, i) {
		b = appendBulk(b, r.id)
		b = appendBulk(b, a.arrival)
	} else {
		b = appendBulk(b, "")
		b = appendBulk(b, "0")
	}
	b = appendBulkInt(b, waitLease.Milliseconds())
	b = appendBulk(b, flag(a.tries > 1))
	b = appendBulk(b, a.handoff)
	b = appendBulk(b, flag(take))
	if r.c.waitReplicas > 0 {
		b = a.appendWait(b)
	}
	return b
}

// appendWait appends the WAIT of WithWait to b.
func (a *attempt) appendWait(b []byte) []byte {
	return appendCommand(b, "WAIT", strconv.Itoa(a.r.c.waitReplicas), strconv.FormatInt(a.r.c.waitTimeout.Milliseconds(), 10))
}

// counterLife is how long a fencing counter outlives its key's last
// grant: with the clock floor, ten max TTLs and at least ten seconds
// (every later token is above the clock by then, whatever the counter
// was); with plain counters, for ever (0), since they are the only order.
func (r *Redlock) counterLife() time.Duration {
	if !r.c.clockFloor {
		return 0
	}
	return max(10*r.c.maxTTL, 10*time.Second)
}

// nodeFailed records that node i failed the try with err: it could not
// be reached, timed out, or answered an error.
func (a *attempt) nodeFailed(i int, c *call, err error) {
	a.state[i], a.cause[i] = failed, &locker.NodeError{Node: c.node.addr, Err: err}
	a.r.tel.nodeError(c.node.addr, errorKind(err))
}

// nodeLost records that node i's marker does not admit the server
// process the client found there (it lost its data, restarted or evicted
// keys): the node is suspected and left out of the try.
func (a *attempt) nodeLost(i int, c *call) {
	c.node.suspect(time.Now())
	a.state[i], a.cause[i] = excluded, &locker.NodeError{Node: c.node.addr, Err: errLost}
}

// record turns node i's replies into its outcome.
func (a *attempt) record(i int, c *call) {
	r := a.r
	a.set[i] = true // a request that timed out may still have set the key
	if c.err != nil {
		a.nodeFailed(i, c, c.err)
		return
	}
	rep := c.rep[0]
	if err := rep.err(); err != nil {
		a.nodeFailed(i, c, explain("the acquire script", err))
		return
	}
	if rep.n != -2 {
		c.node.recorded.Store(true)
	}
	switch {
	case rep.n == -2:
		a.nodeLost(i, c)
		a.set[i] = false // the script sets nothing then
		return
	case rep.n == -1 || rep.n <= -10:
		a.state[i], a.set[i] = held, false
		a.token[i] = int64(waitRefresh / time.Millisecond)
		if rep.n <= -10 {
			a.token[i] = -rep.n - 10
		}
		a.queued = a.queued || a.queue
		return
	}
	a.token[i] = rep.n
	if r.c.waitReplicas > 0 {
		if w := c.rep[len(c.rep)-1]; w.err() != nil || w.n < int64(r.c.waitReplicas) {
			a.state[i] = failed
			a.cause[i] = &locker.NodeError{Node: c.node.addr, Err: fmt.Errorf("WAIT: %d of %d replicas acknowledged in %v "+
				"(%v)", w.n, r.c.waitReplicas, r.c.waitTimeout, w.err())}
			return
		}
	}
	a.state[i] = granted
}
