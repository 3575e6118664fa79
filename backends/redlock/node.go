package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/locker"
)

// downFor is how long a node whose dial failed is skipped before the next
// dial, so that a dead node costs nothing instead of a dial per round.
const downFor = 100 * time.Millisecond

// node is one Redis master: its client options, a pool of raw
// connections and what this client knows of its health.
type node struct {
	addr   string
	opt    *redis.Options
	client *redis.Client // the caller's client, used for pub/sub
	idle   chan *conn
	closed atomic.Bool

	mu        sync.Mutex
	downUntil time.Time
	downErr   error
	health    health // restart quarantine; see quarantine.go
}

func newNode(c *redis.Client) *node {
	opt := c.Options()
	return &node{addr: opt.Addr, opt: opt, client: c, idle: make(chan *conn, max(opt.PoolSize, 1))}
}

// get returns an idle connection or dials a new one.
func (n *node) get(ctx context.Context, deadline time.Time) (*conn, error) {
	select {
	case c := <-n.idle:
		return c, nil
	default:
	}
	now := time.Now()
	n.mu.Lock()
	if now.Before(n.downUntil) {
		err := n.downErr
		n.mu.Unlock()
		return nil, err
	}
	n.mu.Unlock()
	c, err := dial(ctx, n.opt, deadline)
	if err != nil {
		if ctx.Err() == nil { // our own cancellation says nothing of the node
			n.mu.Lock()
			n.downUntil, n.downErr = time.Now().Add(downFor), err
			n.mu.Unlock()
		}
		return nil, err
	}
	return c, nil
}

// put returns a healthy connection to the pool.
func (n *node) put(c *conn) {
	if n.closed.Load() {
		c.close()
		return
	}
	select {
	case n.idle <- c:
	default:
		c.close()
	}
}

func (n *node) close() {
	n.closed.Store(true)
	for {
		select {
		case c := <-n.idle:
			c.close()
		default:
			return
		}
	}
}

// maxReplies bounds the commands one node gets in one round.
const maxReplies = 4

// call is one node's part of a round: the commands written to it and
// the replies read back.
type call struct {
	node  *node
	skip  bool // not part of this round
	conn  *conn
	info  bool // the round carries INFO and GET marker first
	want  int  // replies expected
	rep   [maxReplies]reply
	err   error         // the node could not be reached, or failed
	extra time.Duration // added to the read deadline (WAIT blocks on purpose)
}

// nodeErr wraps the call's error with its node's address.
func (c *call) nodeErr() error {
	if c.err == nil {
		return nil
	}
	return &locker.NodeError{Node: c.node.addr, Err: c.err}
}

// exchange runs one round: it writes every call's commands (appended by
// build to the call's connection) before it reads any reply, so the round
// costs the slowest node's round trip, not the sum, and spawns nothing.
// A node that answers NOSCRIPT gets its scripts loaded and the commands
// again. A connection that fails or times out is closed; the others go
// back to their pools.
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
		c.want, c.info, c.err = 0, false, nil
		if err := ctx.Err(); err != nil {
			c.err = err
			continue
		}
		conn, err := c.node.get(ctx, deadline)
		if err != nil {
			c.err = err
			continue
		}
		c.conn = conn
		build(i, c)
		if err := conn.nc.SetDeadline(deadline.Add(c.extra)); err != nil {
			c.fail(err)
			continue
		}
		if _, err := conn.nc.Write(conn.buf); err != nil {
			c.fail(err)
		}
	}
	for i := range calls {
		c := &calls[i]
		if c.skip || c.conn == nil {
			continue
		}
		if err := c.read(deadline.Add(c.extra)); err != nil {
			c.fail(err)
			continue
		}
		c.conn.buf = c.conn.buf[:0]
		c.node.put(c.conn)
		c.conn = nil
	}
}

// read reads the call's replies; on NOSCRIPT it loads the scripts and
// sends the same commands once more.
func (c *call) read(deadline time.Time) error {
	for i := range c.want {
		r, err := readReply(c.conn.rd)
		if err != nil {
			return err
		}
		c.rep[i] = r
	}
	noScript := false
	for i := range c.want {
		if isNoScript(c.rep[i].err()) {
			noScript = true
		}
	}
	if !noScript {
		return nil
	}
	// The node lost its scripts (SCRIPT FLUSH, or a restart behind a
	// proxy that kept the connection): load them and replay the round.
	// The commands before the failed EVALSHA are reads or idempotent.
	req := append([]byte(nil), c.conn.buf...)
	c.conn.buf = c.conn.buf[:0]
	for _, s := range allScripts {
		c.conn.buf = appendCommand(c.conn.buf, "SCRIPT", "LOAD", s.src)
	}
	c.conn.buf = append(c.conn.buf, req...)
	return c.conn.roundTrip(deadline, len(allScripts)+c.want, func(i int, r reply) error {
		if i < len(allScripts) {
			return r.err()
		}
		c.rep[i-len(allScripts)] = r
		return nil
	})
}

// fail records err and closes the connection, whose state is unknown.
func (c *call) fail(err error) {
	if c.conn != nil {
		c.conn.close()
		c.conn = nil
	}
	c.err = err
}
