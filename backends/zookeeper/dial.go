package zookeeper

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// dialer opens the zk.Conn's connections. It does two things go-zookeeper
// cannot be asked for:
//   - it reads the server's reply to each connect request, which carries
//     the negotiated session timeout and the session id (0 when the
//     session has expired), so that the Locker knows the timeout the server
//     enforces, and when a session was revalidated by the leader;
//   - it remembers the open connections, so that Close can cut one that
//     go-zookeeper is still reading with a deadline of many seconds.
type dialer struct {
	tls *tls.Config
	// onConnect receives each connect reply: the session id, the
	// negotiated timeout and the time the connection was dialled, which
	// is before the connect request was sent.
	onConnect func(id int64, timeout time.Duration, dialled time.Time)

	mu     sync.Mutex
	conns  map[*sniffConn]struct{}
	closed bool
}

// Dial implements zk.Dialer.
func (d *dialer) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	dialled := time.Now()
	nd := &net.Dialer{Timeout: timeout}
	var c net.Conn
	var err error
	if d.tls != nil {
		cfg := d.tls.Clone()
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(address); err == nil {
				cfg.ServerName = host
			}
		}
		c, err = tls.DialWithDialer(nd, network, address, cfg)
	} else {
		c, err = nd.Dial(network, address)
	}
	if err != nil {
		return nil, err
	}
	sc := &sniffConn{Conn: c, d: d, dialled: dialled}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	d.conns[sc] = struct{}{}
	return sc, nil
}

// close cuts every connection and refuses new ones.
func (d *dialer) close() {
	d.mu.Lock()
	d.closed = true
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// sniffConn is a connection whose first bytes, the server's connect
// reply, are decoded on their way to go-zookeeper.
type sniffConn struct {
	net.Conn
	d       *dialer
	dialled time.Time

	// Only the goroutine reading the connection touches these: first
	// go-zookeeper's connect, then its receive loop, which it starts
	// after.
	head []byte
	done bool
}

// connectReplyPrefix is how much of the connect reply is needed: the
// 4-byte frame length, then protocolVersion int32, timeOut int32 (ms) and
// sessionId int64, big-endian.
const connectReplyPrefix = 4 + 4 + 4 + 8

// Read implements net.Conn.
func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.done {
		c.head = append(c.head, p[:n]...)
		if len(c.head) >= connectReplyPrefix {
			c.done = true
			timeout := time.Duration(binary.BigEndian.Uint32(c.head[8:12])) * time.Millisecond
			id := int64(binary.BigEndian.Uint64(c.head[12:20]))
			c.head = nil
			c.d.onConnect(id, timeout, c.dialled)
		}
	}
	return n, err
}

// Close implements net.Conn.
func (c *sniffConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.conns, c)
	c.d.mu.Unlock()
	return c.Conn.Close()
}
