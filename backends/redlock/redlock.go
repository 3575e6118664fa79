package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/locker"
)

// Defaults of the options.
const (
	// DefaultMaxTTL is the longest TTL a lease may ask for, and the length
	// of a restarted node's quarantine.
	DefaultMaxTTL = time.Minute
	// DefaultDrift is the clock drift allowance: validity loses TTL×drift
	// (plus 2 ms).
	DefaultDrift = 0.01
)

// Option configures a Redlock.
type Option func(*options) error

type options struct {
	fencing      bool
	noClockFloor bool // plain counters: WithClockFloor(false)
	quarantine   bool
	maxTTL       time.Duration
	drift        float64
	nodeTimeout  time.Duration // 0: scaled from the TTL
	waitReplicas int
	waitTimeout  time.Duration
}

// WithFencing makes every lease carry a fencing token: a per-key counter
// on each node, advanced by the acquire script; the lease's token is the
// maximum over the majority that granted it, written back to a majority
// before Acquire returns, so any later grant, whose majority overlaps this
// one, returns a larger token. A counter lives as long as its node's data:
// a majority of nodes restarted empty (the quarantine keeps them from
// granting a held lock, not from forgetting their counters) would hand
// out small tokens again, so by default every token is also raised to at
// least the acquiring client's clock in microseconds (see WithClockFloor).
// Off by default.
func WithFencing(on bool) Option {
	return func(o *options) error { o.fencing = on; return nil }
}

// WithClockFloor, on by default with fencing, raises every token to at
// least the acquiring client's clock in microseconds (the same floor for
// every node of a grant, so they agree on the token and need no write
// back), so that nodes restarted without their counters still hand out
// tokens above the ones issued before, as long as the clients' clocks do
// not disagree by more than the time between two grants of a key (NTP
// keeps them within milliseconds; a restart takes seconds). Tokens then
// look like timestamps. WithClockFloor(false) leaves plain counters (1, 2, 3, ...),
// which only persistence (appendfsync always) keeps increasing across
// restarts. WithClockFloor(true) implies WithFencing(true).
func WithClockFloor(on bool) Option {
	return func(o *options) error {
		o.noClockFloor = !on
		if on {
			o.fencing = true
		}
		return nil
	}
}

// WithQuarantine turns the restart quarantine on or off (on by default):
// a node whose Redis process changed (run_id) or lost its data stays out
// of the quorum until it has been up for MaxTTL, so that it cannot grant a
// lock it forgot. See Bootstrap for new nodes.
func WithQuarantine(on bool) Option {
	return func(o *options) error { o.quarantine = on; return nil }
}

// WithMaxTTL sets the longest TTL a lease may have (DefaultMaxTTL), which
// is also how long a restarted node is kept out of the quorum. Every
// client of the same nodes must use the same value.
func WithMaxTTL(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return locker.Invalidf("max TTL %v: must be positive", d)
		}
		o.maxTTL = d
		return nil
	}
}

// WithDrift sets the clock drift factor (DefaultDrift): a lease's
// validity is its TTL minus the time the grant took minus TTL×drift+2ms.
func WithDrift(f float64) Option {
	return func(o *options) error {
		if f < 0 || f >= 0.5 {
			return locker.Invalidf("drift %v: must be in [0, 0.5)", f)
		}
		o.drift = f
		return nil
	}
}

// WithNodeTimeout sets how long a round waits for each node. By default
// it is TTL/50, between 20 ms and 50 ms: far below the TTL, so a dead
// node cannot eat the validity, and enough for a loaded machine. (A round
// ends as soon as a majority has answered, so a slow minority costs
// nothing.)
func WithNodeTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return locker.Invalidf("node timeout %v: must be positive", d)
		}
		o.nodeTimeout = d
		return nil
	}
}

// WithWait makes every grant wait, with Redis WAIT, until replicas
// replicas of the node acknowledged the lock, for at most timeout; a node
// whose replicas do not acknowledge in time does not count. It is meant
// for masters that have replicas (Sentinel): it narrows, but does not
// close, the window in which a failover loses a lock, because WAIT does
// not make replication synchronous.
func WithWait(replicas int, timeout time.Duration) Option {
	return func(o *options) error {
		if replicas < 0 || timeout < 0 {
			return locker.Invalidf("wait for %d replicas within %v: must not be negative", replicas, timeout)
		}
		if replicas > 0 && timeout < time.Millisecond {
			// WAIT n 0 blocks until the replicas answer, however long.
			return locker.Invalidf("wait for %d replicas within %v: the timeout must be at least 1ms", replicas, timeout)
		}
		o.waitReplicas, o.waitTimeout = replicas, timeout
		return nil
	}
}

// Redlock is a distributed lock over N independent Redis masters. It
// implements locker.Locker and is safe for concurrent use; share one per
// process.
type Redlock struct {
	nodes  []*node // in canonical order (by address), the same in every client
	quorum int
	o      options

	life    context.Context // parent of every lease; cancelled by Close
	cancel  context.CancelCauseFunc
	queue   queue
	handoff handoff
	once    sync.Once

	// Recycled attempts and call slices: their buffers then need no
	// allocation on the hot path.
	attempts sync.Pool
	calls    sync.Pool
}

var _ locker.Locker = (*Redlock)(nil)

// New returns a Redlock over the given nodes, one go-redis client per
// independent master (5 is the usual number; any N ≥ 1 works, with a
// quorum of N/2+1). Each client must be a *redis.Client, since Redlock
// needs one node per client; its options (dialer, TLS, credentials,
// database) are used for Redlock's own connections. A Sentinel failover
// client works, but Redlock's connections move to a new master only when
// they break (backends/sentinel adds a follower that moves them at once).
// Redlock does not close the clients.
func New(clients []redis.UniversalClient, opts ...Option) (*Redlock, error) {
	if len(clients) == 0 {
		return nil, locker.Invalidf("redlock needs at least one Redis client, got none")
	}
	o := options{quarantine: true, maxTTL: DefaultMaxTTL, drift: DefaultDrift}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	nodes := make([]*node, len(clients))
	for i, uc := range clients {
		c, ok := uc.(*redis.Client)
		if !ok || c == nil {
			return nil, locker.Invalidf("client %d is a %T: Redlock needs one *redis.Client per independent master", i, uc)
		}
		nodes[i] = newNode(c)
	}
	slices.SortStableFunc(nodes, func(a, b *node) int { return strings.Compare(a.addr, b.addr) })
	for i := 1; i < len(nodes); i++ {
		if nodes[i].addr == nodes[i-1].addr && nodes[i].opt.DB == nodes[i-1].opt.DB {
			return nil, locker.Invalidf("node %s given twice: the masters must be independent", nodes[i].addr)
		}
	}
	life, cancel := context.WithCancelCause(context.Background())
	r := &Redlock{nodes: nodes, quorum: len(nodes)/2 + 1, o: o, life: life, cancel: cancel}
	r.handoff.r = r
	if !o.quarantine {
		for _, n := range nodes {
			n.health.admitted = true
		}
	}
	return r, nil
}

// Quorum is the number of nodes that must grant a lease: N/2+1.
func (r *Redlock) Quorum() int { return r.quorum }

// Info implements locker.Locker.
func (r *Redlock) Info() locker.Info {
	addrs := make([]string, len(r.nodes))
	for i, n := range r.nodes {
		addrs[i] = n.addr
	}
	g := fmt.Sprintf("a majority (%d of %d) of independent Redis masters hold the key; ", r.quorum, len(r.nodes))
	if r.o.quarantine {
		g += fmt.Sprintf("a restarted node is kept out of the quorum for %v; ", r.o.maxTTL)
	} else {
		g += "unsafe if a majority node restarts without its data; "
	}
	g += "unsafe if a node's clock jumps or the holder pauses past its validity"
	if r.o.fencing {
		g += " (fencing tokens let the resource reject a paused holder)"
	}
	return locker.Info{Name: "redlock", Nodes: addrs, Quorum: r.quorum, Fencing: r.o.fencing, Guarantee: g}
}

// Close ends every lease still held (with locker.ErrLost wrapping
// locker.ErrClosed), stops the release subscriptions and closes Redlock's
// own connections. It does not close the clients given to New.
func (r *Redlock) Close() error {
	r.once.Do(func() {
		r.cancel(locker.ErrClosed)
		r.handoff.wg.Wait()
		for _, n := range r.nodes {
			n.close()
		}
	})
	return nil
}

// closed returns ErrClosed once Close has been called.
func (r *Redlock) closed() error {
	if r.life.Err() != nil {
		return locker.ErrClosed
	}
	return nil
}

// Bootstrap admits into the quorum, at once, every node that has never
// been admitted (it has no marker), instead of letting each wait one
// MaxTTL of uptime. Call it once when the nodes are new; never after a
// node restarted without its data, which is exactly what the quarantine
// protects against. It returns the joined errors of the nodes it could
// not reach.
func (r *Redlock) Bootstrap(ctx context.Context) error {
	if err := r.closed(); err != nil {
		return err
	}
	calls := r.newCalls(r.nodes)
	now := time.Now()
	exchange(ctx, calls, adminTimeout, func(_ int, c *call) {
		c.buf = appendCommand(c.buf, "INFO", "server")
		c.buf = appendCommand(c.buf, "GET", markerKey)
		c.p.want = 2
	}, nil)
	var errs []error
	admit := make([]string, len(calls))
	for i := range calls {
		c := &calls[i]
		if c.err == nil {
			admit[i], c.err = c.node.observe(c.rep[0], c.rep[1], now, r.o.maxTTL, true)
		}
		if c.err != nil {
			errs = append(errs, c.nodeErr())
		}
	}
	errs = append(errs, r.admit(ctx, calls, admit)...)
	return errors.Join(errs...)
}

// admit writes the marker on the calls' nodes that have a run_id in
// runIDs, and returns the errors of those it could not write.
func (r *Redlock) admit(ctx context.Context, calls []call, runIDs []string) []error {
	var targets []call
	var ids []string
	for i := range calls {
		if runIDs[i] != "" && calls[i].err == nil {
			targets = append(targets, call{node: calls[i].node})
			ids = append(ids, runIDs[i])
		}
	}
	if len(targets) == 0 {
		return nil
	}
	exchange(ctx, targets, adminTimeout, func(i int, c *call) {
		c.buf = appendCommand(c.buf, "SET", markerKey, ids[i])
		c.p.want = 1
	}, nil)
	var errs []error
	for i := range targets {
		c := &targets[i]
		if c.err == nil {
			c.err = c.rep[0].err()
		}
		if c.err != nil {
			errs = append(errs, c.nodeErr())
			continue
		}
		c.node.admit(ids[i])
	}
	return errs
}

// adminTimeout bounds each node's answer in Bootstrap and admissions,
// which are rare and not on a lease's clock (ctx may bound them further).
const adminTimeout = 2 * time.Second

// getCalls returns one call per node, recycled when possible.
func (r *Redlock) getCalls() []call {
	if c, ok := r.calls.Get().(*[]call); ok {
		for i := range *c {
			(*c)[i].skip, (*c)[i].extra = false, 0
		}
		return *c
	}
	return r.newCalls(r.nodes)
}

// putCalls keeps calls for the next round.
func (r *Redlock) putCalls(calls []call) { r.calls.Put(&calls) }

// newCalls returns one call per node.
func (r *Redlock) newCalls(nodes []*node) []call {
	calls := make([]call, len(nodes))
	for i, n := range nodes {
		calls[i].node = n
	}
	return calls
}

// timeout is the per-node timeout for a lease of the given TTL.
func (r *Redlock) timeout(ttl time.Duration) time.Duration {
	if r.o.nodeTimeout > 0 {
		return r.o.nodeTimeout
	}
	return min(max(ttl/50, 20*time.Millisecond), 50*time.Millisecond)
}
