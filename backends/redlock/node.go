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

var errClosedNode = errors.New("redlock closed")

// node is one Redis master: its client options, Redlock's connection to
// it and what this client knows of its health.
type node struct {
	addr   string
	opt    *redis.Options
	client *redis.Client // the caller's client, used for pub/sub

	mu        sync.Mutex
	c         *conn // nil until dialled, and after it broke
	closed    bool
	downUntil time.Time
	downErr   error
	health    health // restart quarantine; see quarantine.go
}

func newNode(c *redis.Client) *node {
	opt := c.Options()
	return &node{addr: opt.Addr, opt: opt, client: c}
}

// send queues req on the node's connection, dialling it if needed, and
// writes it unless another sender is writing, in which case that sender
// writes it with its own: concurrent requests share one write, and the
// server one read. The replies go to p; collect them with receive.
func (n *node) send(ctx context.Context, p *pending, req []byte) error {
	n.mu.Lock()
	c, err := n.connLocked(ctx, p.deadline)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	p.conn, p.got, p.err, p.done = c, 0, nil, false
	busy := len(c.queue) > 0 // other requests in flight: others are sending too
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
	return c, nil
}

// receive waits for p's replies. If nobody is reading the connection, it
// reads, delivering the replies of the requests queued before p to their
// owners, then hands the reading on to the next waiter; so a lone caller
// reads its own replies with no hand-off at all.
func (n *node) receive(p *pending) error {
	for {
		n.mu.Lock()
		if p.done {
			n.mu.Unlock()
			return p.err
		}
		c := p.conn
		if c.reading {
			n.mu.Unlock()
			<-p.wake
			continue
		}
		c.reading = true
		n.mu.Unlock()
		err := n.readUntil(c, p)
		n.mu.Lock()
		c.reading = false
		if err != nil {
			n.breakLocked(c, err)
		} else if len(c.queue) > 0 {
			c.queue[0].signal() // its owner reads next
		}
		n.mu.Unlock()
	}
}

// readUntil reads replies in order until p has all of its own.
func (n *node) readUntil(c *conn, p *pending) error {
	for {
		n.mu.Lock()
		if c.broken || len(c.queue) == 0 {
			n.mu.Unlock()
			return errors.New("connection reset")
		}
		head := c.queue[0]
		n.mu.Unlock()
		if err := c.nc.SetReadDeadline(head.deadline); err != nil {
			return err
		}
		r, err := readReply(c.rd)
		if err != nil {
			return err
		}
		n.mu.Lock()
		if c.broken || len(c.queue) == 0 || c.queue[0] != head {
			n.mu.Unlock()
			return errors.New("connection reset")
		}
		head.rep[head.got] = r
		head.got++
		if head.got == head.want {
			c.queue[0] = nil
			c.queue = c.queue[1:]
			head.done = true
			if head != p {
				head.signal()
			}
		}
		done := p.done
		n.mu.Unlock()
		if done {
			return nil
		}
	}
}

// breakLocked closes a connection that failed or timed out: its state is
// unknown, so every request still waiting on it fails with err.
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
		p.err, p.done = err, true
		p.signal()
	}
	c.queue, c.wbuf = nil, nil
}

func (n *node) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.c != nil {
		n.breakLocked(n.c, errClosedNode)
	}
}

// call is one node's part of a round: the commands sent to it and the
// replies read back.
type call struct {
	node  *node
	skip  bool // not part of this round
	info  bool // the request carries INFO and GET marker first
	req   []byte
	p     pending
	rep   []reply // p's replies, once received
	err   error   // the node could not be reached, or failed
	extra time.Duration
}

// nodeErr wraps the call's error with its node's address.
func (c *call) nodeErr() error {
	if c.err == nil {
		return nil
	}
	return &locker.NodeError{Node: c.node.addr, Err: c.err}
}

// exchange runs one round: it sends every call's request (built by
// build) before it waits for any reply, so the round costs the slowest
// node's round trip, not the sum, and spawns nothing. A node that answers
// NOSCRIPT gets its scripts loaded and the request again.
func exchange(ctx context.Context, calls []call, timeout time.Duration, build func(int, *call)) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for i := range calls {
		c := &calls[i]
		if c.skip {
			continue
		}
		c.info, c.err, c.rep = false, nil, nil
		c.req, c.p.want = c.req[:0], 0
		if c.p.wake == nil {
			c.p.wake = make(chan struct{}, 1)
		}
		if err := ctx.Err(); err != nil {
			c.err = err
			continue
		}
		build(i, c)
		c.p.deadline = deadline.Add(c.extra)
		c.err = c.node.send(ctx, &c.p, c.req)
	}
	for i := range calls {
		c := &calls[i]
		if c.skip || c.err != nil {
			continue
		}
		if c.err = c.node.receive(&c.p); c.err != nil {
			continue
		}
		c.rep = c.p.rep[:c.p.want]
		if hasNoScript(c.rep) {
			c.err = c.reload(ctx)
		}
	}
}

// reload loads the scripts on a node that lost them (SCRIPT FLUSH, or a
// restart behind a proxy that kept the connection) and sends the call's
// request again. The commands of a request before its EVALSHA are reads
// or idempotent.
func (c *call) reload(ctx context.Context) error {
	var req []byte
	for _, s := range allScripts {
		req = appendCommand(req, "SCRIPT", "LOAD", s.src)
	}
	req = append(req, c.req...)
	want := c.p.want
	c.p.want = len(allScripts) + want
	if err := c.node.send(ctx, &c.p, req); err != nil {
		return err
	}
	if err := c.node.receive(&c.p); err != nil {
		return err
	}
	for _, r := range c.p.rep[:len(allScripts)] {
		if err := r.err(); err != nil {
			return err
		}
	}
	c.rep = c.p.rep[len(allScripts):c.p.want]
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
