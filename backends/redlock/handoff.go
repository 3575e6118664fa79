package redlock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Hand-off. A goroutine whose Acquire finds the key held queues for it on
// the key's queue nodes — quorum nodes, consecutive in canonical order
// from one that the key's hash picks, so that hot keys spread their
// queues over every node and a hung node holds up only the keys whose
// queues it keeps: the acquire script adds this Redlock's id to the key's
// waiters there, ordered by when the Acquire began (the same order on
// every node). The release script on a queue node, instead of deleting a
// key that has live waiters, reserves it for the first of them and pushes
// the key's name on that waiter's wake-up list; the waiter, woken at
// once, claims the key with its next attempt. Every other client is
// refused meanwhile: the queue nodes are a majority, so a newcomer can get
// the other nodes at most, too few. A Redlock blocks on its own wake-up
// list (BLPOP) on every node, with one connection to each that it dials
// once and keeps: no connection per Acquire, a release wakes exactly the
// waiter it hands the key to, in whatever process, and any queue node
// that the release reached wakes it, so that a hung minority of them
// delays nobody.
//
// A waiter keeps its place while it keeps trying (every attempt renews
// it; waits between attempts are capped at waitRefresh), and loses it
// waitLease after its last attempt, or reserveFor after the key was
// reserved for it if it does not claim it by then: a dead or paused
// waiter delays the others once, by reserveFor at most. A key whose holder
// dies is not released: it expires, and goes to whoever asks first. A
// waiter none of whose key's queue nodes answers (they are hung or cut
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
		for _, n := range h.r.nodes {
			h.wg.Add(1)
			go h.run(n)
		}
	}
}

// unwatch stops delivering key's wake-ups.
func (h *handoff) unwatch(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.waiting, key)
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
func (h *handoff) run(n *node) {
	defer h.wg.Done()
	ctx := h.r.life
	list := wakePrefix + h.r.id
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
				h.deliver(rep.elems[1])
			}
		}
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		c.nc.Close()
	}
}

// deliver wakes the attempt waiting for the key a wake-up names, once
// per release (each queue node it reached sends one). A goroutine of this
// Redlock that holds or awaits the key, but does not watch it yet (its
// first try is on its way), is woken when it does. A wake-up for a key
// nobody here wants any more is a reservation nobody will claim (its
// Acquire gave up as the key was handed to it): the reservation is
// handed on at once, rather than block the key until it expires.
func (h *handoff) deliver(wakeup string) {
	i := strings.LastIndexByte(wakeup, 0)
	if i < 0 {
		return
	}
	key, release := wakeup[:i], wakeup[i+1:]
	h.mu.Lock()
	if h.last[key] == release {
		h.mu.Unlock()
		return
	}
	if len(h.last) > 4096 {
		clear(h.last)
	}
	h.last[key] = release
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
		h.r.event(eventHandoff, "", nil)
		select {
		case wake <- struct{}{}:
		default:
		}
	case !wanted:
		h.r.background(func() { h.r.cede(key) })
	}
}

// cede gives up this Redlock's place in key's queue on every node, and
// hands on a reservation made for it.
func (r *Redlock) cede(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	calls := r.getCalls()
	defer r.putCalls(calls)
	r.release(ctx, calls, key, reservedValue+r.id, r.reserveFor(DefaultMaxTTL), true)
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
