package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Acquire implements locker.Locker. Goroutines of this Redlock that want
// the same key queue for it in FIFO order; the one at the head retries
// until ctx ends, waking at once when the key is released anywhere (the
// release script pushes a hand-off token; see handoff.go) rather than
// sleeping through its backoff.
func (r *Redlock) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	o, err := r.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if err := r.queue.enter(ctx, key, r.life); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	a := r.newAttempt(key, o)
	defer r.done(a)
	lease, err := locker.Retry(ctx, o.Retry, a.wake, func(ctx context.Context) (locker.Lease, error) {
		lease, err := a.run(ctx)
		if errors.Is(err, locker.ErrNotAcquired) {
			a.watch() // from now on, wake on releases
		}
		return lease, err
	})
	if err != nil {
		r.queue.leave(key)
		return nil, err
	}
	return lease, nil
}

// TryAcquire implements locker.Locker: one attempt, and ErrNotAcquired
// at once if another goroutine of this Redlock holds or awaits the key.
func (r *Redlock) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	o, err := r.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if !r.queue.tryEnter(key) {
		return nil, fmt.Errorf("%w: %q is held by this process", locker.ErrNotAcquired, key)
	}
	a := r.newAttempt(key, o)
	defer r.done(a)
	lease, err := a.run(ctx)
	if err != nil {
		r.queue.leave(key)
		return nil, err
	}
	return lease, nil
}

// resolve checks the key and options, and that the Redlock is open.
func (r *Redlock) resolve(key string, opts []locker.Option) (locker.Options, error) {
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		return o, err
	}
	if o.TTL < time.Millisecond {
		return o, locker.Invalidf("TTL %v for key %q: Redis expires in whole milliseconds", o.TTL, key)
	}
	if r.o.quarantine && o.TTL > r.o.maxTTL {
		return o, locker.Invalidf("TTL %v for key %q: above the max TTL %v that the restart quarantine covers (see WithMaxTTL)", o.TTL, key, r.o.maxTTL)
	}
	return o, r.closed()
}

// Per-node outcome of one attempt.
const (
	notAsked uint8 = iota
	granted        // the node set the key for us and may vote
	held           // the key has another value there
	excluded       // the node may not vote now (quarantine)
	failed         // unreachable, timed out, or an error reply
	late           // not waited for: a majority had answered
)

// attempt is one Acquire's state across its tries.
type attempt struct {
	r     *Redlock
	key   string
	o     locker.Options
	value string
	start time.Time
	calls []call
	state []uint8
	token []int64
	set   []bool  // we may have set the key there: release it on failure
	cause []error // why a node failed or was excluded
	admit []string
	cmd   []byte // the acquire command, the same for every node

	// contended: the last try lost to other clients on live nodes, so try
	// the priority node alone first; losers then cost one command instead
	// of a round on every node, and nobody splits the vote.
	contended bool
	wake      chan struct{}
	stop      func()
}

// newAttempt returns an attempt for key, recycled when possible: its
// buffers then need no allocation.
func (r *Redlock) newAttempt(key string, o locker.Options) *attempt {
	if a, ok := r.attempts.Get().(*attempt); ok {
		a.key, a.o, a.contended = key, o, false
		return a
	}
	n := len(r.nodes)
	return &attempt{
		r: r, key: key, o: o,
		calls: r.newCalls(r.nodes),
		state: make([]uint8, n), token: make([]int64, n), set: make([]bool, n),
		cause: make([]error, n), admit: make([]string, n),
		wake: make(chan struct{}, 1),
	}
}

// done ends an Acquire's attempt and keeps it for the next one.
func (r *Redlock) done(a *attempt) {
	a.unwatch()
	a.stop = nil
	select { // a release notified after the last try must not wake the next owner
	case <-a.wake:
	default:
	}
	r.attempts.Put(a)
}

// watch starts waiting for the key's hand-off tokens, once.
func (a *attempt) watch() {
	if a.stop == nil {
		a.stop = a.r.handoff.wait(a.key, a.wake)
	}
}

func (a *attempt) unwatch() {
	if a.stop != nil {
		a.stop()
	}
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
	a.value = newValue()
	a.start = time.Now()
	clear(a.state)
	clear(a.set)
	clear(a.cause)
	clear(a.admit)

	if p := a.priority(); a.contended && p >= 0 {
		a.ask(ctx, func(i int) bool { return i == p })
		if a.state[p] == held {
			return nil, a.fail(ctx, "")
		}
		// Granted, or the priority node failed: ask the others.
		a.ask(ctx, func(i int) bool { return i != p })
	} else {
		a.ask(ctx, func(int) bool { return true })
	}
	if a.count(granted) < a.r.quorum && a.splitWon() {
		a.claim(ctx)
	}
	a.admitNodes(ctx)
	if a.count(granted) < a.r.quorum {
		return nil, a.fail(ctx, "")
	}
	token, err := a.fence(ctx)
	if err != nil {
		return nil, a.fail(ctx, err.Error())
	}
	validUntil := a.start.Add(a.o.TTL - a.driftAllowance())
	if !time.Now().Before(validUntil) {
		return nil, a.fail(ctx, fmt.Sprintf("validity exhausted: the grant took %v of a %v TTL", time.Since(a.start).Round(time.Microsecond), a.o.TTL))
	}
	h := &hold{r: a.r, key: a.key, value: a.value}
	g := locker.Grant{Key: a.key, Token: uint64(token), HasToken: a.r.o.fencing, ValidUntil: validUntil}
	return locker.NewLease(a.r.life, h, g, a.o), nil
}

// driftAllowance is TTL×drift + 2 ms, what validity loses to clock drift.
func (a *attempt) driftAllowance() time.Duration {
	return time.Duration(float64(a.o.TTL)*a.r.o.drift) + 2*time.Millisecond
}

// ask sends the acquire script to the nodes for which which(i) holds and
// records what each answered.
func (a *attempt) ask(ctx context.Context, which func(int) bool) {
	r := a.r
	now := time.Now()
	for i := range a.calls {
		a.calls[i].skip = !which(i)
		a.calls[i].extra = r.o.waitTimeout
		if !a.calls[i].skip {
			a.state[i] = notAsked
		}
	}
	a.cmd = a.appendAcquire(a.cmd[:0])
	exchange(ctx, a.calls, r.timeout(a.o.TTL), func(i int, c *call) {
		c.p.want = 1
		if r.o.waitReplicas > 0 {
			c.p.want++
		}
		if !r.o.quarantine || !c.node.needInfo(now) {
			c.req = a.cmd // shared: the connection copies it
			return
		}
		c.buf = appendCommand(c.buf, "INFO", "server")
		c.buf = appendCommand(c.buf, "GET", markerKey)
		c.buf = append(c.buf, a.cmd...)
		c.info = true
		c.p.want += 2
	}, func(i int, c *call) bool {
		a.record(i, c, now)
		return a.decided()
	})
	for i := range a.calls {
		c := &a.calls[i]
		switch {
		case c.skip || a.state[i] != notAsked:
		case errors.Is(c.err, errNoReply):
			a.state[i], a.set[i] = late, true // it may still set the key
		default: // timed out, or ctx ended
			a.record(i, c, now)
		}
	}
}

// decided reports whether the round has its answer: a majority granted,
// or too few nodes are left to make one.
func (a *attempt) decided() bool {
	g, open := 0, 0
	for i, s := range a.state {
		switch {
		case s == granted:
			g++
		case s == notAsked && !a.calls[i].skip:
			open++ // asked in this round, not answered yet
		}
	}
	return g >= a.r.quorum || g+open < a.r.quorum
}

// appendAcquire appends the acquire script's EVALSHA for this try (and
// WAIT when asked for) to b.
func (a *attempt) appendAcquire(b []byte) []byte {
	r := a.r
	var num [20]byte
	b = appendArray(b, 11)
	b = appendBulk(b, "EVALSHA")
	b = appendBulk(b, acquireScript.sha)
	b = appendBulk(b, "3")
	b = appendBulk(b, a.key)
	b = appendBulkConcat(b, a.key, tokenSuffix)
	b = appendBulk(b, markerKey)
	b = appendBulk(b, a.value)
	b = appendBulk(b, string(strconv.AppendInt(num[:0], a.o.TTL.Milliseconds(), 10)))
	b = appendBulk(b, flag(r.o.quarantine))
	b = appendBulk(b, flag(r.o.fencing))
	floor := int64(0)
	if r.o.fencing && !r.o.noClockFloor {
		floor = time.Now().UnixMicro()
	}
	b = appendBulkInt(b, floor)
	if r.o.waitReplicas > 0 {
		b = appendCommand(b, "WAIT", strconv.Itoa(r.o.waitReplicas), strconv.FormatInt(r.o.waitTimeout.Milliseconds(), 10))
	}
	return b
}

// record turns node i's replies into its outcome.
func (a *attempt) record(i int, c *call, now time.Time) {
	r := a.r
	a.set[i] = true // a request that timed out may still have set the key
	if c.err != nil {
		a.state[i], a.cause[i] = failed, c.nodeErr()
		return
	}
	k := 0
	if c.info {
		runID, err := c.node.observe(c.rep[0], c.rep[1], now, r.o.maxTTL, false)
		if err != nil {
			a.state[i], a.cause[i] = failed, &locker.NodeError{Node: c.node.addr, Err: err}
			return
		}
		a.admit[i] = runID
		k = 2
	}
	rep := c.rep[k]
	if err := rep.err(); err != nil {
		a.state[i], a.cause[i] = failed, &locker.NodeError{Node: c.node.addr, Err: err}
		return
	}
	switch {
	case rep.n == -2:
		c.node.suspect()
		a.state[i], a.set[i] = excluded, false
		a.cause[i] = &locker.NodeError{Node: c.node.addr, Err: errors.New("lost its data (no marker): quarantined")}
		return
	case rep.n == -1:
		a.state[i], a.set[i] = held, false
		return
	}
	a.token[i] = rep.n
	if r.o.waitReplicas > 0 {
		if w := c.rep[k+1]; w.err() != nil || w.n < int64(r.o.waitReplicas) {
			a.state[i] = failed
			a.cause[i] = &locker.NodeError{Node: c.node.addr, Err: fmt.Errorf("WAIT: %d of %d replicas acknowledged in %v (%v)", w.n, r.o.waitReplicas, r.o.waitTimeout, w.err())}
			return
		}
	}
	if !c.node.votes() {
		a.state[i] = excluded
		a.cause[i] = &locker.NodeError{Node: c.node.addr, Err: fmt.Errorf("restarted: quarantined until %s", c.node.quarantinedUntil().Format(time.RFC3339Nano))}
		return
	}
	a.state[i] = granted
}

func (a *attempt) count(s uint8) int {
	n := 0
	for _, x := range a.state {
		if x == s {
			n++
		}
	}
	return n
}

// admitNodes writes the marker on the nodes whose quarantine this round
// found over (rare: once per node restart).
func (a *attempt) admitNodes(ctx context.Context) {
	for _, id := range a.admit {
		if id != "" {
			_ = a.r.admit(ctx, a.calls, a.admit)
			return
		}
	}
}

// fail releases whatever the try may have set and returns the error that
// explains the refusal, naming each failing node.
func (a *attempt) fail(ctx context.Context, why string) error {
	release := false
	for _, s := range a.set {
		release = release || s
	}
	if release {
		for i := range a.calls {
			a.calls[i].skip = !a.set[i]
			a.calls[i].extra = 0
		}
		a.r.release(context.WithoutCancel(ctx), a.calls, a.key, a.value, a.o.TTL)
	}
	g, h := a.count(granted), a.count(held)
	// Only contention among live nodes calls for the priority node first;
	// after node failures, ask everyone again.
	a.contended = h > 0 && a.count(failed) == 0
	if why == "" {
		why = fmt.Sprintf("%d of %d nodes granted, quorum %d", g, len(a.state), a.r.quorum)
		if h > 0 {
			why += fmt.Sprintf("; held by another client on %d", h)
		}
	}
	var causes []error
	for _, c := range a.cause {
		if c != nil {
			causes = append(causes, c)
		}
	}
	if len(causes) == 0 {
		return fmt.Errorf("%w: %q: %s", locker.ErrNotAcquired, a.key, why)
	}
	return fmt.Errorf("%w: %q: %s: %w", locker.ErrNotAcquired, a.key, why, errors.Join(causes...))
}

// newValue returns a fresh 128-bit random lock value, hex-encoded.
func newValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func flag(on bool) string {
	if on {
		return "1"
	}
	return "0"
}
