package redlock

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// conn is one raw connection to a node. Redlock writes a round's commands
// to one conn per node before reading any reply, so a round costs the
// slowest node's round trip and needs no goroutine; go-redis's API cannot
// do that, so Redlock dials these itself, with the client's own options
// (dialer, TLS, credentials, database).
type conn struct {
	nc  net.Conn
	rd  *bufio.Reader
	buf []byte // the request being built
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
	c := &conn{nc: nc, rd: bufio.NewReaderSize(nc, 4096)}
	user, pass, err := credentials(ctx, opt)
	if err != nil {
		nc.Close()
		return nil, err
	}
	want := 0
	if pass != "" {
		if user != "" {
			c.buf = appendCommand(c.buf, "AUTH", user, pass)
		} else {
			c.buf = appendCommand(c.buf, "AUTH", pass)
		}
		want++
	}
	if opt.DB != 0 {
		c.buf = appendCommand(c.buf, "SELECT", fmt.Sprint(opt.DB))
		want++
	}
	for _, s := range allScripts {
		c.buf = appendCommand(c.buf, "SCRIPT", "LOAD", s.src)
		want++
	}
	if err := c.roundTrip(deadline, want, func(i int, r reply) error { return r.err() }); err != nil {
		nc.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	return c, nil
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

// send writes c.buf and empties it.
func (c *conn) send(deadline time.Time) error {
	if err := c.nc.SetDeadline(deadline); err != nil {
		return err
	}
	_, err := c.nc.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// roundTrip sends c.buf and reads want replies, handing each to f.
func (c *conn) roundTrip(deadline time.Time, want int, f func(int, reply) error) error {
	if err := c.send(deadline); err != nil {
		return err
	}
	var first error
	for i := range want {
		r, err := readReply(c.rd)
		if err != nil {
			return err
		}
		if err := f(i, r); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (c *conn) close() { c.nc.Close() }
