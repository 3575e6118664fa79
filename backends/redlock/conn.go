package redlock

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// conn is Redlock's own connection to a node, shared by every goroutine
// of the Redlock: requests are pipelined on it and a reader goroutine
// hands each reply to the request it answers. Redlock dials it itself,
// with the client's options (dialer, TLS, credentials, database), because
// go-redis can neither send one command to five nodes before waiting for
// any reply, nor let a caller stop waiting once a majority has answered,
// nor batch the commands of concurrent callers into one write — the three
// things that make Redlock fast. Its state is guarded by its node's mutex.
type conn struct {
	nc net.Conn
	rd *bufio.Reader

	wbuf    []byte     // requests not yet written
	spare   []byte     // the buffer being written, recycled
	writing bool       // a sender is writing wbuf
	queue   []*pending // requests awaiting replies, in the order written
	broken  bool
}

// pending is one request on a connection: the replies it expects, filled
// in by the connection's reader. A pending is used once.
type pending struct {
	want     int
	got      int
	rep      [maxReplies]reply
	err      error
	done     atomic.Bool   // rep (or err) is complete
	deadline time.Time     // when the round stops waiting for it
	signal   chan struct{} // the round's: capacity 1, poked on completion
}

// maxReplies bounds the commands of one request (scripts reloaded in
// front of the longest request).
const maxReplies = 8

// finish completes p and pokes its round. Once done is set, p belongs to
// its owner again (which may recycle it): p is not touched after that.
func (p *pending) finish(err error) {
	signal := p.signal
	p.err = err
	p.done.Store(true)
	select {
	case signal <- struct{}{}:
	default:
	}
}

// pendings recycles the pendings whose replies have been read.
var pendings = sync.Pool{New: func() any { return new(pending) }}

// newPending returns a clear pending for a round signalling on signal.
func newPending(signal chan struct{}) *pending {
	p := pendings.Get().(*pending)
	p.want, p.got, p.err, p.signal = 0, 0, nil, signal
	p.done.Store(false)
	return p
}

// recycle gives back a pending that is done; one still in flight (a reply
// the round did not wait for) is left to the garbage collector.
func recycle(p *pending) {
	if p != nil && p.done.Load() {
		p.rep = [maxReplies]reply{}
		pendings.Put(p)
	}
}

// dial opens a connection to the node that opt describes, authenticates,
// selects the database and loads the scripts, all in one round trip.
func dial(ctx context.Context, opt *redis.Options, deadline time.Time) (*conn, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	network := opt.Network
	if network == "" {
		network = "tcp"
	}
	nc, err := opt.Dialer(ctx, network, opt.Addr)
	if err != nil {
		return nil, err
	}
	user, pass, err := credentials(ctx, opt)
	if err != nil {
		nc.Close()
		return nil, err
	}
	var req []byte
	want := 0
	if pass != "" {
		if user != "" {
			req = appendCommand(req, "AUTH", user, pass)
		} else {
			req = appendCommand(req, "AUTH", pass)
		}
		want++
	}
	if opt.DB != 0 {
		req = appendCommand(req, "SELECT", fmt.Sprint(opt.DB))
		want++
	}
	for _, s := range allScripts {
		req = appendCommand(req, "SCRIPT", "LOAD", s.src)
		want++
	}
	c := &conn{nc: nc, rd: bufio.NewReaderSize(nc, 16<<10)}
	if err := c.handshake(req, want, deadline); err != nil {
		nc.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	return c, nil
}

// handshake writes req and checks its want replies, before anyone else
// uses the connection.
func (c *conn) handshake(req []byte, want int, deadline time.Time) error {
	if err := c.nc.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.nc.Write(req); err != nil {
		return err
	}
	var first error
	for range want {
		r, err := readReply(c.rd)
		if err != nil {
			return err
		}
		if err := r.err(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// credentials returns the username and password the client would use.
func credentials(ctx context.Context, opt *redis.Options) (user, pass string, err error) {
	switch {
	case opt.CredentialsProviderContext != nil:
		return opt.CredentialsProviderContext(ctx)
	case opt.CredentialsProvider != nil:
		user, pass = opt.CredentialsProvider()
		return user, pass, nil
	default:
		return opt.Username, opt.Password, nil
	}
}
