package redlock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/locker"
)

// Timing of the connections.
const (
	// downFor is how long a node whose dial failed is skipped before the
	// next dial, so that a dead node costs nothing instead of a dial per
	// round.
	downFor = 100 * time.Millisecond
	// lateFor is how long past its round's deadline a reply may still come
	// before the connection is declared dead (a paused or hung server);
	// until then late replies are read and dropped, and the connection
	// lives on. The client's ReadTimeout replaces it when shorter.
	lateFor = time.Second
	// writeTimeout bounds one write of a connection's batch. It belongs to
	// the connection, never to a caller: a caller whose context is about
	// to end must not fail a batch that carries other callers' requests.
	// The client's WriteTimeout replaces it when shorter.
	writeTimeout = time.Second
	// stallAfter is how long a connection may wait for replies before its
	// writes are moved off the callers' goroutines (see conn.stalled).
	stallAfter = 20 * time.Millisecond
	// defaultDialTimeout bounds a dial and its handshake when the client's
	// options set no DialTimeout.
	defaultDialTimeout = 5 * time.Second
)

var (
	// errClosed: the Redlock was closed while the request was on its way.
	errClosed = fmt.Errorf("%w: its connections are closed", locker.ErrClosed)
	// errConnecting: the node's connection is being dialled, in the
	// background, and this round does not wait for it.
	errConnecting = errors.New("connecting")
	// errRestarted: the request was meant for a server process (run_id)
	// that is no longer the one behind the connection.
	errRestarted = errors.New("the server process changed (restart): quarantine check pending")
	// errNoReply: the node had not answered when the round stopped
	// waiting because it had its answer (a majority granted, say). It
	// says nothing bad of the node.
	errNoReply = errors.New("no reply needed")
	// errTimeout: the node did not answer within the per-node timeout.
	errTimeout = errors.New("no reply within the per-node timeout")
	// errLost: the acquire script found no marker admitting the server
	// process (it restarted, lost its data, or evicted keys).
	errLost = errors.New("lost its data, restarted or evicted keys (no marker for this process): quarantined")
	// errNotAdmitted: no probe has admitted the node yet.
	errNotAdmitted = errors.New("not admitted yet (its connection's quarantine probe has not answered)")
)

// node is one Redis master: its client options, Redlock's connections to
// it and what this client knows of its health.
type node struct {
	r    *Redlock
	addr string
	opt  *redis.Options // the caller's client's: address, dialer, auth, TLS, timeouts

	late, writeTimeout time.Duration // lateFor and writeTimeout, or the client's
	twin               twin          // set when the node is one server with another

	ctx    context.Context // ends with close: stops dials and the prober
	cancel context.CancelFunc
	first  chan struct{} // closed once every lane's first dial has ended
	dials  int           // lanes whose first dial has not ended

	mu     sync.Mutex
	main   lane // every request but grants that WAIT
	slow   lane // grants that WAIT (WithWait), which block their connection
	closed bool
	live   map[*conn]struct{} // every connection whose reader runs: close closes them all
	queued uint64             // requests queued on the node's connections so far, dials' probes included
	health health             // restart quarantine; see quarantine.go
	// recorded is set once an acquire script of this Redlock has run on
	// the node: it recorded the Redlock's max TTL there (see pick).
	recorded atomic.Bool
	down     string // the failure last reported (event), "" while it is up
	bg       sync.WaitGroup
}

// lane is one of a node's connections, and its dialling state.
type lane struct {
	c         *conn // nil until dialled, and after it broke
	dialing   bool
	dialled   bool // a dial has ended once
	downUntil time.Time
	downErr   error
	parked    []parked // requests waiting for the dial in progress
}

// parked is a request sent while its lane was being dialled: it goes out
// as soon as the connection is up, in order, or fails with the dial.
type parked struct {
	p   *pending
	req []byte
	run string
}

// maxParked bounds the requests that wait for one dial; beyond it, rounds
// do not wait for the node.
const maxParked = 1024

func newNode(r *Redlock, opt *redis.Options) *node {
	n := &node{r: r, addr: opt.Addr, opt: opt, first: make(chan struct{}), dials: 1, late: lateFor, writeTimeout: writeTimeout}
	// The client's timeouts, when shorter: a lock must not wait on a
	// socket longer than its owner asked, nor longer than Redlock's own
	// bounds (go-redis's defaults are 3 s).
	if opt.ReadTimeout > 0 {
		n.late = min(n.late, opt.ReadTimeout)
	}
	if opt.WriteTimeout > 0 {
		n.writeTimeout = min(n.writeTimeout, opt.WriteTimeout)
	}
	if r.c.waitReplicas > 0 {
		n.dials++
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
}

// start dials the node's connections, so that the first lock round finds
// them ready.
func (n *node) start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.redialLocked(&n.main)
	if n.r.c.waitReplicas > 0 {
		n.redialLocked(&n.slow)
	}
}

// answering reports whether the node's main connection is up and has not
// left requests unanswered for long (see conn.stalled): a node that is
// hung, cut off or being redialled is not.
func (n *node) answering(now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.main.c != nil && !n.main.c.stalled(now)
}

// connected reports whether the node's main connection is up.
func (n *node) connected() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.main.c != nil
}

// send queues req on the node's connection (slow: the one for grants that
// WAIT) and writes it unless another sender is writing, in which case that
// sender writes it with its own: concurrent requests share one write, and
// the server one read. The connection's reader fills in p. Without a
// connection, a dial starts in the background and req waits for it (up to
// maxParked requests), unless the node is known to be down: then send
// fails at once.
//
// A request built for a server process (run, a run_id; "" for any) is
// sent only on a connection to that process: a grant must not reach a
// restarted server whose marker names the process before it.
func (n *node) send(p *pending, req []byte, slow bool, run string) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return errClosed
	}
	l := &n.main
	if slow {
		l = &n.slow
	}
	c := l.c
	if c == nil {
		// Dialled in the background: the request waits for the
		// connection, and its round for the request up to its deadline
		// only, while the dial keeps its own.
		err := n.redialLocked(l)
		if err == errConnecting && len(l.parked) < maxParked {
			l.parked = append(l.parked, parked{p, append([]byte(nil), req...), run})
			err = nil
		}
		n.mu.Unlock()
		return err
	}
	if run != "" && run != c.run {
		n.mu.Unlock()
		return errRestarted
	}
	now := time.Now()
	busy := len(c.queue) > 0 // other requests in flight: others are sending too
	if !busy {
		c.since = now
		_ = c.nc.SetReadDeadline(p.deadline.Add(n.late))
	}
	n.enqueueLocked(c, p, req)
	if c.writing {
		n.mu.Unlock()
		return nil
	}
	c.writing = true
	if c.stalled(now) {
		// The server reads nothing: its socket buffer may be full, and a
		// write would block this caller. Write from the background.
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			n.mu.Lock()
			defer n.mu.Unlock()
			n.writeLocked(c)
		}()
		n.mu.Unlock()
		return nil
	}
	if busy {
		// Under concurrency, let the goroutines that are ready to run add
		// their requests before the write, so that one write (and one
		// read on the server) carries many. A lone caller writes at once.
		n.mu.Unlock()
		runtime.Gosched()
		n.mu.Lock()
	}
	n.writeLocked(c)
	n.mu.Unlock()
	return nil
}

// writeLocked writes c's batch until it is empty, releasing n.mu during
// each write. The write deadline is the connection's own.
func (n *node) writeLocked(c *conn) {
	for len(c.wbuf) > 0 && !c.broken {
		buf := c.wbuf
		c.wbuf = c.spare[:0]
		n.mu.Unlock()
		err := c.nc.SetWriteDeadline(time.Now().Add(n.writeTimeout))
		if err == nil {
			_, err = c.nc.Write(buf)
		}
		n.mu.Lock()
		c.spare = buf[:0]
		if err != nil {
			n.breakLocked(c, err)
		}
	}
	c.writing = false
}

// redialLocked starts dialling lane l in the background unless it is
// already, or the node is known to be down, and returns why there is no
// connection now.
func (n *node) redialLocked(l *lane) error {
	if n.closed {
		return errClosed
	}
	if l.dialing {
		return errConnecting
	}
	if time.Now().Before(l.downUntil) {
		return l.downErr
	}
	l.dialing = true
	n.bg.Add(1)
	go n.dial(l)
	return errConnecting
}

// enqueueLocked queues p's request req on c, to be written, and gives it
// its place in the order of the node's requests (see observeLocked).
func (n *node) enqueueLocked(c *conn, p *pending, req []byte) {
	n.queued++
	p.queued = n.queued
	c.queue = append(c.queue, p)
	c.wbuf = append(c.wbuf, req...)
}

// dial dials lane l, with its own deadline (the client's DialTimeout),
// and installs the connection.
func (n *node) dial(l *lane) {
	defer n.bg.Done()
	timeout := n.opt.DialTimeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(n.ctx, timeout)
	defer cancel()
	hs := handshake{scripts: true, info: true}
	if n.r.c.quarantine {
		hs.probe = n.r.probeRequest("look")
	}
	n.mu.Lock()
	n.queued++ // the probe goes first on the connection
	asked := n.queued
	n.mu.Unlock()
	c, answer, err := dial(ctx, n.opt, hs)

	n.mu.Lock()
	defer n.mu.Unlock()
	l.dialing = false
	if !l.dialled {
		l.dialled = true
		if n.dials--; n.dials == 0 {
			close(n.first)
			n.r.dials.ended()
		}
	}
	if err == nil && n.closed {
		c.nc.Close()
		err = errClosed
	}
	waiting := l.parked
	l.parked = nil
	if err != nil {
		l.downUntil, l.downErr = time.Now().Add(downFor), err
		for _, w := range waiting {
			w.p.finish(err)
		}
		n.reportLocked(err)
		return
	}
	l.c, l.downErr = c, nil
	n.reportLocked(nil)
	if hs.probe != nil {
		if f := strings.Fields(answer); len(f) > 1 {
			c.run = f[1]
		}
		n.observeLocked(answer, asked, time.Now())
	} else {
		c.run = answer
	}
	if other := n.r.runs.claim(n, c.run); other != nil {
		n.sameServer(other, c.run)
	}
	for _, w := range waiting {
		if w.run != "" && w.run != c.run {
			w.p.finish(errRestarted)
			continue
		}
		if len(c.queue) == 0 {
			c.since = time.Now()
			_ = c.nc.SetReadDeadline(w.p.deadline.Add(n.late))
		}
		n.enqueueLocked(c, w.p, w.req)
	}
	if len(c.wbuf) > 0 {
		c.writing = true
		n.writeLocked(c)
	}
	if n.live == nil {
		n.live = map[*conn]struct{}{}
	}
	n.live[c] = struct{}{}
	n.bg.Add(1)
	go n.read(c)
}

// reportLocked reports a dial's failure (err) or success (nil) when it
// changes the node's standing: once per kind of failure, not per dial.
func (n *node) reportLocked(err error) {
	switch {
	case err == nil && n.down != "":
		n.down = ""
		n.r.event(eventReachable, n.addr, nil)
	case err != nil && n.down != err.Error():
		n.down = err.Error()
		if errors.Is(err, ErrConfig) {
			n.r.event(eventConfig, n.addr, err)
		} else if !errors.Is(err, locker.ErrClosed) {
			n.r.event(eventUnreachable, n.addr, err)
		}
	}
}

// read hands each reply on c to the request it answers, in order, until
// the connection fails or is closed.
func (n *node) read(c *conn) {
	defer n.bg.Done()
	for {
		r, err := readReply(c.rd)
		n.mu.Lock()
		if err == nil && len(c.queue) == 0 {
			err = errors.New("reply to no request")
		}
		if err != nil {
			failed := !c.broken && !n.closed // not broken on purpose
			n.breakLocked(c, err)
			delete(n.live, c)
			if failed {
				n.reportLocked(err)
			}
			n.mu.Unlock()
			return
		}
		p := c.queue[0]
		p.rep[p.got] = r
		p.got++
		c.since = time.Now()
		if p.got == p.want {
			c.queue[0] = nil
			c.queue = c.queue[1:]
			if len(c.queue) > 0 {
				_ = c.nc.SetReadDeadline(c.queue[0].deadline.Add(n.late))
			} else {
				_ = c.nc.SetReadDeadline(time.Time{})
			}
			p.finish(nil)
		}
		n.mu.Unlock()
	}
}

// breakLocked closes a connection that failed: its state is unknown, so
// every request still waiting on it fails with err. The next request
// dials again, in the background.
func (n *node) breakLocked(c *conn, err error) {
	if c.broken {
		return
	}
	c.broken = true
	c.nc.Close()
	for _, l := range []*lane{&n.main, &n.slow} {
		if l.c == c {
			l.c = nil
		}
	}
	for _, p := range c.queue {
		p.finish(err)
	}
	c.queue, c.wbuf = nil, nil
}

// close closes the connections and waits for the node's goroutines:
// every connection whose reader runs, whether or not a lane still holds
// it, so that no reader can stay blocked in a read that nothing breaks.
func (n *node) close() {
	n.cancel()
	n.mu.Lock()
	n.closed = true
	for _, l := range []*lane{&n.main, &n.slow} {
		if l.c != nil {
			n.breakLocked(l.c, errClosed)
		}
		for _, w := range l.parked {
			w.p.finish(errClosed)
		}
		l.parked = nil
	}
	for c := range n.live {
		n.breakLocked(c, errClosed)
	}
	n.mu.Unlock()
	n.bg.Wait()
}
