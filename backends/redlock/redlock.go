package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/locker"
)

// Redlock is a distributed lock over N independent Redis masters. It
// implements locker.Locker and is safe for concurrent use; share one per
// process.
type Redlock struct {
	nodes  []*node // in canonical order (by address), the same in every client
	quorum int
	c      config
	id     string // this Redlock's name in the nodes' wait queues
	tel    *telemetry
	runs   servers
	k      keyspace // where its own keys live on the nodes

	// Close's order, in stages: ops begins closing (no new operation,
	// waits wake up on its context) and the operations in flight end; the
	// leases' keys are released; life ends (the leases end); then bg
	// begins closing (no new background work), the background work ends,
	// then the connections.
	ops    locker.Closing
	bg     locker.Closing
	life   context.Context // parent of every lease
	cancel context.CancelCauseFunc
	once   sync.Once

	queue   queue
	handoff handoff
	holds   holds
	hot     hotKeys     // keys that take the full path for a while (see lean.go)
	warm    atomic.Bool // the first rounds no longer wait for dials
	dials   dialProgress

	// What the nodes told about the quarantine: the largest max TTL
	// recorded on any of them, and whether any was ever seen admitted
	// (not counting what this client's Bootstrap admitted while it ran:
	// bootstrapping, admittedByBootstrap).
	clusterMaxTTL       atomic.Int64
	seenAdmitted        atomic.Bool
	bootstrapping       atomic.Int32
	admittedByBootstrap atomic.Bool

	// Recycled attempts and call slices: their buffers then need no
	// allocation on the hot path.
	attempts sync.Pool
	calls    sync.Pool
}

var _ locker.Locker = (*Redlock)(nil)

// failoverAddr is what go-redis reports as the address of every Sentinel
// failover client.
const failoverAddr = "FailoverClient"

// New returns a Redlock over the given nodes, one go-redis client per
// independent master (5 is the usual number; any N ≥ 1 works, with a
// quorum of N/2+1): a []*redis.Client, a []redis.UniversalClient, or a
// slice of any other client type of go-redis. Each must be a single
// master: a *redis.Client (from NewClient, NewFailoverClient, or
// NewUniversalClient with one address or a MasterName alone) or any type
// with an Options() *redis.Options method; a *redis.ClusterClient (Redis
// Cluster, NewFailoverClusterClient, or NewUniversalClient with several
// addresses, cluster mode or routing to replicas) and a *redis.Ring are
// refused, with an error wrapping locker.ErrInvalid that names the
// client's index and why: they spread keys, or reads, over several
// servers, while Redlock counts each client as one vote.
//
// Redlock uses only each client's options (see the package documentation
// for which, and how) to dial connections of its own: one pipelined
// connection per node for every request, one more per node for grants
// that WAIT (WithWait), and, once an Acquire has had to wait, one
// blocking connection to each node for hand-off notices. So the client's
// hooks (AddHook) do not see Redlock's commands; its Dialer, TLS and
// credentials do apply. Every client must name a different master: the
// nodes are ordered by address, the same way in every process, and two
// databases of one server, or two addresses of one server (found by its
// run_id once connected), are refused (ErrConfig). A Sentinel failover
// client is accepted, but only one (go-redis gives every one the same
// address; backends/sentinel is the lock on one Sentinel-managed master);
// its connections move to a new master when they break. New dials the
// nodes in the background and returns at once; new nodes need Bootstrap,
// once. Redlock does not close the clients; keep them open while it runs
// (a failover client's dialer needs its client).
func New[C redis.UniversalClient](clients []C, opts ...Option) (*Redlock, error) {
	if len(clients) == 0 {
		return nil, locker.Invalidf("redlock needs at least one Redis client, got none")
	}
	c, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	tel, err := newTelemetry(c)
	if err != nil {
		return nil, err
	}
	r := &Redlock{quorum: len(clients)/2 + 1, c: c, id: newID(), tel: tel, k: newKeyspace(c.keyPrefix)}
	r.nodes = make([]*node, len(clients))
	failover := -1
	for i, cl := range clients {
		opt, err := singleMaster(i, cl)
		if err != nil {
			return nil, err
		}
		if opt.Addr == failoverAddr {
			if failover >= 0 {
				return nil, locker.Invalidf("clients %d and %d are both Sentinel failover clients: go-redis gives each the address %q, so Redlock "+
					"cannot tell them apart nor order them alike in every process; use one *redis.Client per master address", failover, i, failoverAddr)
			}
			failover = i
		}
		r.nodes[i] = newNode(r, opt)
	}
	slices.SortStableFunc(r.nodes, func(a, b *node) int { return strings.Compare(a.addr, b.addr) })
	for i := 1; i < len(r.nodes); i++ {
		if a, b := r.nodes[i-1], r.nodes[i]; a.addr == b.addr {
			if a.opt.DB == b.opt.DB {
				return nil, locker.Invalidf("node %s (db %d) given twice: the masters must be independent", b.addr, b.opt.DB)
			}
			return nil, locker.Invalidf("node %s given twice (databases %d and %d): databases of one server are one master, which a restart or a "+
				"failure takes down at once; the masters must be independent servers", b.addr, a.opt.DB, b.opt.DB)
		}
	}
	r.life, r.cancel = context.WithCancelCause(context.Background())
	r.handoff.r = r
	r.holds.m = map[*hold]struct{}{}
	for _, n := range r.nodes {
		n.start()
	}
	return r, nil
}

// singleMaster returns the options of client i, which must be one
// master's, or why it is refused.
func singleMaster(i int, client redis.UniversalClient) (*redis.Options, error) {
	switch cl := client.(type) {
	case nil:
		return nil, locker.Invalidf("client %d is nil", i)
	case *redis.Client:
		if cl == nil {
			return nil, locker.Invalidf("client %d is nil", i)
		}
		return cl.Options(), nil
	case *redis.ClusterClient:
		return nil, locker.Invalidf("client %d is a *redis.ClusterClient (Redis Cluster, NewFailoverClusterClient, or NewUniversalClient "+
			"with several addresses, cluster mode or routing to replicas): it spreads keys or reads over several servers, and Redlock "+
			"counts each client as one independent master; give one *redis.Client per master (for Sentinel: NewFailoverClient)", i)
	case *redis.Ring:
		return nil, locker.Invalidf("client %d is a *redis.Ring: it shards keys over several servers, and Redlock counts each client as "+
			"one independent master; give one *redis.Client per shard instead", i)
	case interface{ Options() *redis.Options }:
		opt := cl.Options()
		if opt == nil {
			return nil, locker.Invalidf("client %d (%T) has no options", i, client)
		}
		return opt, nil
	default:
		return nil, locker.Invalidf("client %d is a %T, which does not say which single master it talks to (no Options() *redis.Options "+
			"method); give one *redis.Client per master", i, client)
	}
}

// newID returns a random name for a Redlock: 64 bits, hex.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
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
	if r.c.quarantine {
		g += fmt.Sprintf("a node that lost its data (restart, flush, eviction) is kept out of the quorum for the largest max TTL of its "+
			"clients (this one's: %v) after the loss is detected; ", r.c.maxTTL)
	} else {
		g += "unsafe if a majority of the nodes restarts without its data; "
	}
	g += "unsafe if a node's clock jumps or the holder pauses past its validity"
	if r.c.fencing {
		g += " (fencing tokens let the resource reject a paused holder)"
	}
	// The contract: validity is TTL − elapsed − (TTL×drift + 2 ms) from
	// the start of the attempt that won, which began after Acquire was
	// called.
	return locker.Info{Name: "redlock", Nodes: addrs, Quorum: r.quorum, Fencing: r.c.fencing,
		DriftRate: r.c.drift, Drift: 2 * time.Millisecond, Guarantee: g}
}

// Close releases the keys of the leases still held (on every node, as
// etcd's Session.Close revokes its lease, rather than leave them taken for
// a TTL) and of the releases that no majority confirmed, all at once and
// each within a second; ends those leases with locker.ErrLost wrapping
// locker.ErrClosed; ends the operations in flight with errors wrapping
// locker.ErrClosed; and closes Redlock's own connections once every
// goroutine it started has returned, which it bounds even when the
// servers behind them hang. It does not close the clients given to New.
// Calls after the first return nil.
func (r *Redlock) Close() error {
	r.once.Do(func() {
		r.ops.Begin()       // local waits end
		r.handoff.pokeAll() // and waits between attempts
		r.ops.Wait()
		r.holds.closeAll()
		r.cancel(locker.ErrClosed)
		r.handoff.close()
		r.bg.Begin()
		r.bg.Wait()
		for _, n := range r.nodes {
			n.close()
		}
	})
	return nil
}

// begin counts an operation in flight, or returns ErrClosed once Close
// has begun. The caller calls r.ops.Done when it ends.
func (r *Redlock) begin() error { return r.ops.Add() }

// background runs f on a goroutine of its own that Close waits for,
// unless Close has finished waiting.
func (r *Redlock) background(f func()) { r.bg.Go(f) }

// closed returns ErrClosed once Close has begun.
func (r *Redlock) closed() error { return r.ops.Err() }

// ready waits, the first time, until the nodes' first dials have ended
// (all: Bootstrap), or until a quorum is connected and the others have
// had firstGrace more, or ctx ends: so that the first round does not find
// the connections still being dialled, and a node that does not answer
// its dial (a hung server accepts TCP connections and says nothing) costs
// the first rounds firstGrace once, never its dial timeout.
func (r *Redlock) ready(ctx context.Context, all bool) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for all || !r.warm.Load() {
		changed := r.dials.changed()
		up, dialling := 0, 0
		for _, n := range r.nodes {
			select {
			case <-n.first:
				if n.connected() {
					up++
				}
			default:
				dialling++
			}
		}
		if dialling == 0 {
			r.warm.Store(true)
			return
		}
		var grace <-chan time.Time
		if up >= r.quorum && !all {
			left := r.dials.grace(time.Now())
			if left <= 0 {
				r.warm.Store(true)
				return
			}
			if timer == nil {
				timer = time.NewTimer(left)
			} else {
				rearm(timer, left)
			}
			grace = timer.C
		}
		select {
		case <-changed:
		case <-grace:
			r.warm.Store(true)
			return
		case <-ctx.Done():
			return
		case <-r.ops.Context().Done():
			return
		}
	}
}

// dialProgress tells ready when a node's first dial has ended, and keeps
// the one deadline of the grace the last nodes get.
type dialProgress struct {
	mu       sync.Mutex
	ch       chan struct{} // closed and replaced when a first dial ends
	deadline time.Time     // the end of the grace, once a quorum is connected
}

// changed returns a channel that is closed when a first dial ends.
func (d *dialProgress) changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	return d.ch
}

// ended wakes the callers of ready.
func (d *dialProgress) ended() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch != nil {
		close(d.ch)
		d.ch = nil
	}
}

// grace returns how much of the grace is left, starting it at now the
// first time.
func (d *dialProgress) grace(now time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.deadline.IsZero() {
		d.deadline = now.Add(firstGrace)
	}
	return d.deadline.Sub(now)
}

// firstGrace is how long the first round waits for the last nodes' dials
// once a quorum is connected.
const firstGrace = 100 * time.Millisecond

// getCalls returns one call per node, recycled when possible.
func (r *Redlock) getCalls() []call {
	if c, ok := r.calls.Get().(*[]call); ok {
		for i := range *c {
			(*c)[i].skip, (*c)[i].slow, (*c)[i].extra = false, false, 0
		}
		return *c
	}
	return r.newCalls()
}

// putCalls keeps calls for the next round.
func (r *Redlock) putCalls(calls []call) { r.calls.Put(&calls) }

// newCalls returns one call per node.
func (r *Redlock) newCalls() []call {
	calls := make([]call, len(r.nodes))
	for i, n := range r.nodes {
		calls[i].node = n
	}
	return calls
}

// timeout is the per-node timeout for a lease of the given TTL.
func (r *Redlock) timeout(ttl time.Duration) time.Duration {
	if r.c.nodeTimeout > 0 {
		return r.c.nodeTimeout
	}
	return min(max(ttl/50, 20*time.Millisecond), 50*time.Millisecond)
}

// now reads the clock a lease's validity is measured on (WithClock).
func (r *Redlock) now() time.Time {
	if r.c.clock != nil {
		return r.c.clock()
	}
	return time.Now()
}

// validUntil is a validity deadline t of r's clock in time.Now's terms:
// what is left of it by r's clock, from now.
func (r *Redlock) validUntil(t time.Time) time.Time {
	if r.c.clock == nil {
		return t
	}
	return time.Now().Add(t.Sub(r.c.clock()))
}

// holds is the set of leases a Redlock holds, which Close releases.
type holds struct {
	mu sync.Mutex
	m  map[*hold]struct{}
}

func (s *holds) add(h *hold) {
	s.mu.Lock()
	s.m[h] = struct{}{}
	s.mu.Unlock()
}

func (s *holds) remove(h *hold) {
	s.mu.Lock()
	delete(s.m, h)
	s.mu.Unlock()
}

// closeAll releases, all at once and each within releaseTimeout, the
// key of every lease still held, and of every lease whose release did not
// reach a majority, and ends the leases still held with locker.ErrLost
// wrapping locker.ErrClosed.
func (s *holds) closeAll() {
	s.mu.Lock()
	all := make([]*hold, 0, len(s.m))
	for h := range s.m {
		all = append(all, h)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.giveBack()
			h.lease.Lose(locker.ErrClosed)
		}()
	}
	wg.Wait()
}

// rearm sets t to fire after d. It first drops a tick t sent that nobody
// read: under the timers of Go before 1.23 (asynctimerchan=1, which a
// main module at go 1.22 runs with) that tick stays in t.C, and Reset
// alone would let it through at once.
func rearm(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}
