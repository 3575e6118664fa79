package redlock

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/locker"
)

// downFor is how long a node whose dial failed is skipped before the next
// dial, so that a dead node costs nothing instead of a dial per round.
const downFor = 100 * time.Millisecond

// lateFor is how long past its round's deadline a reply may still come
// before the connection is declared dead (a paused or hung server); until
// then late replies are read and dropped, and the connection lives on.
const lateFor = time.Second

var (
	errClosedNode = errors.New("redlock closed")
	// errNoReply: the node had not answered when the round stopped
	// waiting because it had its answer (a majority granted, say). It
	// says nothing bad of the node.
	errNoReply = errors.New("no reply needed")
	// errTimeout: the node did not answer within the per-node timeout.
	errTimeout = errors.New("no reply within the per-node timeout")
)

// node is one Redis master: its client options, Redlock's connection to
// it and what this client knows of its health.
type node struct {
	addr string
	opt  *redis.Options // the caller's client's: address, auth, TLS

	mu        sync.Mutex
	c         *conn // nil until dialled, and after it broke
	closed    bool
	downUntil time.Time
	downErr   error
	health    health // restart quarantine; see quarantine.go
	readers   sync.WaitGroup
}

func newNode(c *redis.Client) *node {
	opt := c.Options()
	return &node{addr: opt.Addr, opt: opt}
}

// send queues req on the node's connection, dialling it if needed, and
// writes it unless another sender is writing, in which case that sender
// writes it with its own: concurrent requests share one write, and the
// server one read. The connection's reader fills in p.
func (n *node) send(ctx context.Context, p *pending, req []byte) error {
	n.mu.Lock()
	c, err := n.connLocked(ctx, p.deadline)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	busy := len(c.queue) > 0 // other requests in flight: others are sending too
	if !busy {
		_ = c.nc.SetReadDeadline(p.deadline.Add(lateFor))
	}
	c.queue = append(c.queue, p)
	c.wbuf = append(c.wbuf, req...)
	if c.writing {
		n.mu.Unlock()
		return nil
	}
	c.writing = true
	if busy {
		// Under concurrency, let the goroutines that are ready to run add
		// their requests before the write, so that one write (and one
		// read on the server) carries many. A lone caller writes at once.
		n.mu.Unlock()
		runtime.Gosched()
		n.mu.Lock()
	}
	for len(c.wbuf) > 0 && !c.broken {
		buf := c.wbuf
		c.wbuf = c.spare[:0]
		n.mu.Unlock()
		err := c.nc.SetWriteDeadline(p.deadline)
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
	n.mu.Unlock()
	return nil
}

// connLocked returns the node's connection, dialling it if there is none.
func (n *node) connLocked(ctx context.Context, deadline time.Time) (*conn, error) {
	if n.closed {
		return nil, errClosedNode
	}
	if n.c != nil {
		return n.c, nil
	}
	if time.Now().Before(n.downUntil) {
		return nil, n.downErr
	}
	c, err := dial(ctx, n.opt, deadline)
	if err != nil {
		if ctx.Err() == nil { // our own cancellation says nothing of the node
			n.downUntil, n.downErr = time.Now().Add(downFor), err
		}
		return nil, err
	}
	n.c = c
	n.readers.Add(1)
	go n.read(c)
	return c, nil
}

// read hands each reply on c to the request it answers, in order, until
// the connection fails or is closed.
func (n *node) read(c *conn) {
	defer n.readers.Done()
	for {
		r, err := readReply(c.rd)
		n.mu.Lock()
		if err == nil && len(c.queue) == 0 {
			err = errors.New("reply to no request")
		}
		if err != nil {
			n.breakLocked(c, err)
			n.mu.Unlock()
			return
		}
		p := c.queue[0]
		p.rep[p.got] = r
		p.got++
		if p.got == p.want {
			c.queue[0] = nil
			c.queue = c.queue[1:]
			if len(c.queue) > 0 {
				_ = c.nc.SetReadDeadline(c.queue[0].deadline.Add(lateFor))
			} else {
				_ = c.nc.SetReadDeadline(time.Time{})
			}
			p.finish(nil)
		}
		n.mu.Unlock()
	}
}

// breakLocked closes a connection that failed: its state is unknown, so
// every request still waiting on it fails with err.
func (n *node) breakLocked(c *conn, err error) {
	if c.broken {
		return
	}
	c.broken = true
	c.nc.Close()
	if n.c == c {
		n.c = nil
	}
	for _, p := range c.queue {
		p.finish(err)
	}
	c.queue, c.wbuf = nil, nil
}

// close closes the connection and waits for its reader to return.
func (n *node) close() {
	n.mu.Lock()
	n.closed = true
	if n.c != nil {
		n.breakLocked(n.c, errClosedNode)
	}
	n.mu.Unlock()
	n.readers.Wait()
}

// call is one node's part of a round: the commands sent to it and the
// replies read back.
type call struct {
	node  *node
	skip  bool   // not part of this round
	info  bool   // the request carries INFO and GET marker first
	buf   []byte // the call's own request buffer, reused from round to round
	req   []byte // what to send: buf, or a request shared by every call
	p     *pending
	rep   []reply // the replies, once complete
	err   error   // the node could not be reached, failed, or had not answered
	extra time.Duration
}

// nodeErr wraps the call's error with its node's address.
func (c *call) nodeErr() error {
	if c.err == nil {
		return nil
	}
	return &locker.NodeError{Node: c.node.addr, Err: c.err}
}

// exchange runs one round: it sends every call's request before it waits
// for any reply (build appends a call's request to c.buf, or points c.req
// at a request shared by every call, and sets c.p.want), then hands each reply to onReply as it
// arrives, in arrival order, until onReply says the round has its answer
// (a majority granted, say), every call is done, the per-node timeout
// passes or ctx ends. The calls still unanswered then get errNoReply; their
// replies are read and dropped when they come. A node that answers
// NOSCRIPT gets its scripts loaded and the request again. onReply may be
// nil: wait for every call.
func exchange(ctx context.Context, calls []call, timeout time.Duration, build func(int, *call), onReply func(int, *call) bool) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	signal := make(chan struct{}, 1)
	waiting := 0
	for i := range calls {
		c := &calls[i]
		if c.skip {
			continue
		}
		recycle(c.p)
		c.info, c.err, c.rep, c.p = false, nil, nil, nil
		c.buf, c.req = c.buf[:0], nil
		if err := ctx.Err(); err != nil {
			c.err = err
			continue
		}
		c.p = newPending(signal)
		build(i, c)
		if c.req == nil {
			c.req = c.buf
		}
		c.p.deadline = deadline.Add(c.extra)
		if c.err = c.node.send(ctx, c.p, c.req); c.err != nil {
			c.p = nil
			continue
		}
		waiting++
	}
	// Calls that failed at once (a dead node) are answers too.
	for i := range calls {
		c := &calls[i]
		if !c.skip && c.p == nil && onReply != nil && onReply(i, c) {
			expire(calls, errNoReply)
			return
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for waiting > 0 {
		for i := range calls {
			c := &calls[i]
			if c.skip || c.p == nil || c.rep != nil || c.err != nil || !c.p.done.Load() {
				continue
			}
			waiting--
			if c.err = c.p.err; c.err == nil {
				c.rep = c.p.rep[:c.p.want]
				if hasNoScript(c.rep) {
					c.err = c.reload(ctx, deadline.Add(c.extra))
				}
			}
			if onReply != nil && onReply(i, c) {
				expire(calls, errNoReply)
				return
			}
		}
		if waiting == 0 {
			return
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline) + maxExtra(calls))
		}
		select {
		case <-signal:
		case <-timer.C:
			expire(calls, errTimeout)
			return
		case <-ctx.Done():
			expire(calls, ctx.Err())
			return
		}
	}
}

// expire gives the calls still unanswered err.
func expire(calls []call, err error) {
	for i := range calls {
		c := &calls[i]
		if !c.skip && c.p != nil && c.rep == nil && c.err == nil {
			c.err = err
		}
	}
}

func maxExtra(calls []call) time.Duration {
	var d time.Duration
	for i := range calls {
		d = max(d, calls[i].extra)
	}
	return d
}

// reload loads the scripts on a node that lost them (SCRIPT FLUSH, or a
// restart behind a proxy that kept the connection) and sends the call's
// request again, waiting for it alone. The commands of a request before
// its EVALSHA are reads or idempotent.
func (c *call) reload(ctx context.Context, deadline time.Time) error {
	var req []byte
	for _, s := range allScripts {
		req = appendCommand(req, "SCRIPT", "LOAD", s.src)
	}
	req = append(req, c.req...)
	p := newPending(make(chan struct{}, 1))
	p.want, p.deadline = len(allScripts)+c.p.want, deadline
	if err := c.node.send(ctx, p, req); err != nil {
		return err
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-p.signal:
	case <-timer.C:
		return errNoReply
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.err != nil {
		return p.err
	}
	for _, r := range p.rep[:len(allScripts)] {
		if err := r.err(); err != nil {
			return err
		}
	}
	recycle(c.p)
	c.p = p
	c.rep = p.rep[len(allScripts):p.want]
	return nil
}

func hasNoScript(reps []reply) bool {
	for _, r := range reps {
		if isNoScript(r.err()) {
			return true
		}
	}
	return false
}
