package redlock

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Hand-off. A goroutine whose Acquire finds the key held queues for it on
// the key's queue nodes — quorum nodes, consecutive in canonical order
// from one that the key's hash picks, so that hot keys spread their
// queues over every node and a hung node holds up only the keys whose
// queues it keeps: the acquire script adds this Redlock's id to the key's
// waiters there, ordered by when the Acquire began (the same order on
// every node), with the TTL it asks for and the value of its try. The
// release script on a queue node, instead of deleting a key that has live
// waiters, hands it to the first of them: it sets the key to that
// waiter's Acquire's hand-off value with the waiter's TTL, and pushes the
// key's name on the waiter's wake-up list. The waiter, woken at once,
// holds the key as soon as every queue node has told it so (see
// attempt.handed for why that is safe), and otherwise claims it with its
// next attempt. Every other client is refused meanwhile: the queue nodes
// are a majority, so a newcomer can get the other nodes at most, too few.
// Before it holds the key, the waiter sets it on those other nodes too
// (attempt.spread), so that a queue node that forgets the key early (a
// clock that jumps, a restart or an eviction nothing detects) does not
// give a newcomer a majority with the nodes that never had it.
// A Redlock blocks on its own wake-up list (BLPOP) on every node, with one
// connection to each that it dials once and keeps: no connection per
// Acquire, a release wakes exactly the waiter it hands the key to, in
// whatever process, and any queue node that the release reached wakes
// it, so that a hung minority of them delays nobody.
//
// A waiter keeps its place while it keeps trying (every attempt renews
// it; waits between attempts are capped at waitRefresh), and loses it
// waitLease after its last attempt, or reserveFor after the key was
// handed or reserved to it if it neither releases nor claims it by then.
// A key handed to a waiter that has stopped trying stays taken for that
// waiter's TTL, like a dead holder's; one only reserved for it (the node
// does not vote, or does not know the waiter's try) for reserveFor. A key
// whose holder dies is not released: it expires, and goes to whoever asks
// first. A waiter none of whose key's queue nodes answers (they are hung
// or cut
// off) expects no wake-up: it paces its attempts by its retry strategy.

// Timing of the hand-off.
const (
	// waitRefresh caps the wait between two attempts of a waiter, so that
	// it renews its place in the queue in time.
	waitRefresh = 500 * time.Millisecond
	// waitLease is how long a waiter keeps its place after an attempt.
	waitLease = 4 * waitRefresh
	// wakeLife is how long an unread wake-up list lives.
	wakeLife = 10 * time.Second
	// blockFor is how long one BLPOP blocks before it is sent again.
	blockFor = 2 * time.Second
)

// home returns the index, in canonical order, of the first of key's queue
// nodes: FNV-1a of the key, modulo the number of nodes, the same in
// every client.
func (r *Redlock) home(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(len(r.nodes)))
}

// queues reports whether node i (in canonical order) keeps the queue of
// the keys whose home is home: the quorum nodes from home on, wrapping
// around.
func (r *Redlock) queues(home, i int) bool {
	return (i-home+len(r.nodes))%len(r.nodes) < r.quorum
}

// queueID is id on the key's queue nodes, "" on the others.
func (r *Redlock) queueID(home, i int, id string) string {
	if r.queues(home, i) {
		return id
	}
	return ""
}

// reserveFor is how long a key stays reserved for the waiter it is handed
// to: enough to wake it and run a round, and short, since a dead waiter
// costs the others that long.
func (r *Redlock) reserveFor(ttl time.Duration) time.Duration {
	return max(4*r.timeout(ttl), 100*time.Millisecond)
}

// handoff delivers a Redlock's wake-ups to its waiting Acquires.
type handoff struct {
	r *Redlock

	mu      sync.Mutex
	waiting map[string]chan struct{} // key -> the wake channel of the attempt waiting for it
	pending map[string]struct{}      // keys woken before their attempt watched them
	last    map[string]string        // key -> the release that sent its last wake-up
	handed  map[string]*handover     // key -> the nodes that handed it to us in its last release
	started bool
	closed  bool
	conns   map[*conn]struct{} // the blocking connections, closed to interrupt BLPOP
	wg      sync.WaitGroup
}

// watch makes wake-ups for key send a value on wake (which has a buffer
// of one), and starts the blocking connections the first time.
func (h *handoff) watch(key string, wake chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if h.waiting == nil {
		h.waiting, h.pending, h.last = map[string]chan struct{}{}, map[string]struct{}{}, map[string]string{}
		h.handed = map[string]*handover{}
		h.conns = map[*conn]struct{}{}
	}
	h.waiting[key] = wake
	if _, ok := h.pending[key]; ok {
		// Woken between its first try and now.
		delete(h.pending, key)
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if !h.started {
		h.started = true
		for i, n := range h.r.nodes {
			h.wg.Add(1)
			go h.run(i, n)
		}
	}
}

// unwatch stops delivering key's wake-ups.
func (h *handoff) unwatch(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.waiting, key)
	delete(h.handed, key)
}

// pokeAll wakes every waiting attempt (Close: they see it and return).
func (h *handoff) pokeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, wake := range h.waiting {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// close stops the blocking connections and waits for their goroutines.
func (h *handoff) close() {
	h.mu.Lock()
	h.closed = true
	for c := range h.conns {
		c.nc.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// run blocks on this Redlock's wake-up list on node n and delivers what
// it pops, until Close.
func (h *handoff) run(i int, n *node) {
	defer h.wg.Done()
	ctx := h.r.life
	list := h.r.k.wake + h.r.id
	req := appendCommand(nil, "BLPOP", list, strconv.FormatFloat(blockFor.Seconds(), 'f', -1, 64))
	for ctx.Err() == nil {
		timeout := n.opt.DialTimeout
		if timeout <= 0 {
			timeout = defaultDialTimeout
		}
		dctx, cancel := context.WithTimeout(ctx, timeout)
		c, _, err := dial(dctx, n.opt, handshake{})
		cancel()
		if err != nil {
			sleep(ctx, downFor)
			continue
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			c.nc.Close()
			return
		}
		h.conns[c] = struct{}{}
		h.mu.Unlock()
		for ctx.Err() == nil {
			rep, err := c.call(req, time.Now().Add(blockFor+adminTimeout))
			if err != nil {
				break
			}
			if rep.kind == '*' && len(rep.elems) == 2 {
				h.deliver(i, rep.elems[1])
			}
		}
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		c.nc.Close()
	}
}

// handover is what the queue nodes that handed a key to this Redlock
// in one release told it: the release, the hand-off value it set, the try
// whose registration it read, and which nodes did (in canonical order).
type handover struct {
	release, value, try string
	nodes               []bool
	count               int
}

// deliver wakes the attempt waiting for the key a wake-up from node i
// names: once per release, and again once a quorum of nodes has told it
// that the release handed it the key (each queue node the release
// reached sends one). A goroutine of this Redlock that holds or awaits
// the key, but does not watch it yet (its first try is on its way), is
// woken when it does. A wake-up for a key nobody here wants any more is a
// reservation or a hand-off nobody will claim (its Acquire gave up as
// the key was handed to it): it is handed on at once, rather than block
// the key until it expires.
func (h *handoff) deliver(i int, wakeup string) {
	key, rest, ok := strings.Cut(wakeup, "\x00")
	if !ok {
		return
	}
	release, rest, _ := strings.Cut(rest, "\x00")
	value, rest, _ := strings.Cut(rest, "\x00")
	try, run, _ := strings.Cut(rest, "\x00")
	h.mu.Lock()
	first := h.last[key] != release
	if first {
		if len(h.last) > 4096 {
			clear(h.last)
		}
		h.last[key] = release
	}
	handed := false
	if try != "" && h.counts(i, run) {
		ho := h.handed[key]
		if ho == nil || ho.release != release || ho.value != value || ho.try != try {
			ho = &handover{release: release, value: value, try: try, nodes: make([]bool, len(h.r.nodes))}
			if len(h.handed) > 4096 {
				clear(h.handed)
			}
			h.handed[key] = ho
		}
		if !ho.nodes[i] {
			ho.nodes[i] = true
			ho.count++
			handed = ho.count == h.r.quorum
		}
	}
	if !first && !handed {
		h.mu.Unlock()
		return
	}
	wake, waiting := h.waiting[key]
	wanted := !waiting && h.r.queue.busy(key)
	if wanted {
		if len(h.pending) > 1024 {
			for k := range h.pending {
				if !h.r.queue.busy(k) {
					delete(h.pending, k)
				}
			}
		}
		h.pending[key] = struct{}{}
	}
	h.mu.Unlock()
	switch {
	case waiting:
		if first {
			h.r.event(eventHandoff, "", nil)
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	case !wanted && first:
		h.r.background(func() { h.r.cede(key, value) })
	}
}

// counts reports whether a hand-off by node i, whose marker named run,
// counts as a vote: the node votes now, for the server process that
// marker names (its connections found it), as an acquire script's grant
// would have to.
func (h *handoff) counts(i int, run string) bool {
	n := h.r.nodes[i]
	now, ok, _ := n.votes(time.Now())
	return ok && (!h.r.c.quarantine || now == run)
}

// takeHanded returns the nodes that handed key to this Redlock in its
// last release (nil if none did), the value they set, the try they
// handed it to, and whether they make a quorum; it forgets them when they do, since a hand-off is
// taken once.
func (h *handoff) takeHanded(key string) (nodes []bool, value, try string, quorum bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ho := h.handed[key]
	if ho == nil {
		return nil, "", "", false
	}
	if ho.count >= h.r.quorum {
		delete(h.handed, key)
		return ho.nodes, ho.value, ho.try, true
	}
	return slices.Clone(ho.nodes), ho.value, ho.try, false
}

// cede gives up this Redlock's place in key's queue on every node, and
// hands on a reservation made for it, or a hand-off to the Acquire whose
// hand-off value is handoff ("" for none): only that Acquire's, so that
// a later Acquire of this Redlock, which may hold the key by then, keeps
// it.
func (r *Redlock) cede(key, handoff string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	calls := r.getCalls()
	defer r.putCalls(calls)
	r.release(ctx, calls, releaseRequest{key: key, value: reservedValue + r.id, also: handoff, reserve: r.reserveFor(DefaultMaxTTL)}, true)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// handed returns the lease that a release handed to the attempt's last
// try, if a quorum of the key's queue nodes told it so, without asking
// the nodes again; nil if none did (its next try then claims the key
// where it was handed over). While some of the key's queue nodes have
// told it and the others are answering, it waits for them, for a quarter
// of the node timeout at most.
//
// Why the lease is safe: each of those nodes set the key to the
// Acquire's hand-off value (a.handoff) with the TTL its last try asked for
// when the release ran there, which was after that try registered there
// (the wake-up names the try whose registration the release read), hence
// after a.start, when the try was sent: so the key lives on each of them,
// a quorum, until at least a.start+TTL by the node's clock — what a grant
// of that try would have given — and the lease's validity is that minus
// the drift allowance, as for a granted try. The hand-off must be to the
// attempt's last try: a later try may have claimed the key from it (set
// its own value), and released it since; the last try itself ran on
// those nodes before the hand-off, so it claimed nothing there. Nobody
// else frees a handed key: no client releases that value but the lease
// made of this Acquire, and cede when the Acquire gave up. Before the
// lease exists the key is set on the other nodes too (spread): those
// keys live a TTL from when they are set, past the lease's validity, and
// the lease is released there as well; if the validity ran out meanwhile
// they are given back and no lease is made. Not with fencing tokens (the
// token must be written back to a majority: the try that claims the key
// does it, with fence) nor WithWait (the replicas must acknowledge the
// grant).
func (a *attempt) handed(ctx context.Context) locker.Lease {
	r := a.r
	if !a.watching || a.tries == 0 || r.c.fencing || r.c.waitReplicas > 0 {
		return nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		nodes, value, try, quorum := r.handoff.takeHanded(a.key)
		if nodes == nil || try != a.value || value != a.handoff {
			return nil
		}
		if quorum {
			validUntil := a.start.Add(a.o.TTL - a.driftAllowance())
			if !r.now().Before(validUntil) {
				return nil
			}
			on := a.spread(ctx, nodes)
			if !r.now().Before(validUntil) {
				a.unspread(ctx, nodes, on)
				return nil
			}
			h := &hold{r: r, key: a.key, value: value, handoff: value, ttl: a.o.TTL, on: on}
			g := locker.Grant{Key: a.key, ValidUntil: r.validUntil(validUntil)}
			h.lease = locker.NewLease(r.life, h, g, a.o)
			r.holds.add(h)
			return h.lease
		}
		now := time.Now()
		for i, told := range nodes {
			if !told && r.queues(a.home, i) && !r.nodes[i].answering(now) {
				return nil // it will not tell: claim the key
			}
		}
		if timer == nil {
			timer = time.NewTimer(r.timeout(a.o.TTL) / 4)
		}
		select {
		case <-a.wake:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
