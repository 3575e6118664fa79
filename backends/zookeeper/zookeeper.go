// Package zookeeper is the ZooKeeper lock: for each key a queue of
// ephemeral sequential znodes under a per-key parent, where the lowest
// sequence number holds the key. It is our own recipe rather than
// go-zookeeper's zk.Lock, which has no context and no way to tell a holder
// that it lost the lock.
//
// # The recipe
//
// Key K lives under the persistent parent <root>/<escaped K> (root
// defaults to /lockbench/locks; K is percent-escaped so that any string is
// one znode name). An acquisition creates a "protected" ephemeral
// sequential child, _c_<guid>-lock-<seq>, so that a create whose reply was
// lost in a reconnect is found again by its GUID instead of left behind.
// The lowest sequence holds the key; every other contender watches only
// the child just below its own (no herd effect) and checks again when that
// one goes — or takes the key at once, without listing the queue again, if
// that child was the only one below its own (later znodes sort after it).
// A waiter whose ctx ends deletes its own znode. TryAcquire creates,
// checks, and deletes its znode when it is not first.
//
// The fencing token is the znode's sequence number, which the server takes
// from the parent's cversion: it strictly increases across the grants of a
// key as long as the parent is never deleted. Parents are therefore
// persistent (not containers) and stay behind, one empty znode per key ever
// locked; deleting one restarts its key's tokens. ZooKeeper's sequence is a
// signed 32-bit counter, so a key can be granted 2^31 times; the Locker
// refuses to grant a key past that rather than hand out a smaller token.
// The node names are those zk.Lock uses, so the two exclude each other on
// the same parent path.
//
// # Sessions, TTL and Extend
//
// Each Locker has one ZooKeeper connection and so one session, whose
// timeout is the "session" param (default 4 s, which is also the smallest
// session a default server, tickTime 2 s, allows). The server may negotiate
// it into its [minSessionTimeout, maxSessionTimeout] range (2 to 20 ticks
// by default); the Locker reads the negotiated value from the server's
// connect response and uses that.
//
// ZooKeeper has no TTL: an ephemeral znode lives as long as its session.
// The TTL is therefore enforced by the client. A lease's ValidUntil is the
// time of the check that found it first plus the TTL; when the lease
// reaches it unreleased, it ends with ErrExpired and deletes its znode, so
// the key becomes free as the contract requires. Extend proves that the
// session is alive and the znode still exists in one request that the
// leader validates (a multi-op holding a version check of the znode) and
// moves ValidUntil to the time the request was sent plus the new TTL; a
// znode that is gone makes it fail with ErrNotHeld, and the lease ends with
// ErrLost. If the client process dies, its leases outlive their TTL until
// the session expires on the server: that bound is the session timeout.
//
// ValidUntil is not capped at the time the session could expire: the
// session is kept alive by heartbeats, not by Extend, and its end has its
// own signal (the lease ends with ErrLost, below). A cap would make any TTL
// longer than the session timeout meaningless and force callers to extend
// at the session's pace.
//
// # How a loss is detected
//
// A holder loses its key when its znode goes: when the session expires, or
// when someone deletes the znode. The Locker learns of it in three ways.
//   - A watch on the lease's own znode: NodeDeleted ends the lease at once
//     with ErrLost. The watch is set 10 ms into the lease, so that the short
//     critical sections that make up most lock traffic do not pay a request
//     for it; a deletion before then is seen when it is set, or by Extend.
//   - The session: a connect response with a new session id (or none: the
//     old one expired) ends every lease of the old session with ErrLost.
//   - Silence: the client cannot learn of an expiry while it is cut off,
//     yet the server may then already have granted the key to someone
//     else. So the Locker keeps, for its session, the send time of the
//     latest request that the leader validated the session for (a create,
//     delete or check, or a reconnect that revalidated the session; reads
//     do not count, since a follower cut off from the leader still serves
//     them), and ends every lease with ErrLost once that time plus the
//     session timeout, less a 5% + 2 ms allowance for clock-rate drift and
//     late timers, has passed. The leader cannot expire the session
//     earlier, because it last heard from the client no earlier than that
//     send time. While the Locker holds or waits for keys it sends such a
//     check every eighth of the session timeout, and skips it when other
//     writes are recent.
//
// None of this helps a holder that stalls (GC, SIGSTOP) past the moment it
// would have noticed: its timers fire late and it may write after another
// client was granted the key. That is what the fencing token is for.
//
// # Params
//
//   - session: the session timeout (a Go duration, default 4s).
//   - root: the path under which the per-key parents live (default
//     /lockbench/locks).
//
// Config.Addrs are the ensemble's client addresses; Username and Password,
// when set, authenticate with the digest scheme and protect the znodes the
// Locker creates with a digest ACL for that user; TLS, when set, wraps
// every connection.
package zookeeper

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
)

// Defaults of the params.
const (
	// DefaultSession is the session timeout asked for when the session
	// param is not set: the smallest a server with the default tickTime
	// (2 s) grants, so that a dead holder frees its keys soon.
	DefaultSession = 4 * time.Second
	// DefaultRoot is the path under which per-key parents are created.
	DefaultRoot = "/lockbench/locks"
)

// Locker is a lock on a ZooKeeper ensemble, safe for concurrent use. It
// implements locker.Locker; open it with Open (or backends.Open("zookeeper",
// cfg)). All its leases share its one session.
type Locker struct {
	addrs []string
	root  string
	acl   []zk.ACL
	creds []byte // "user:password" for digest auth, nil without

	conn   *zk.Conn
	events <-chan zk.Event
	dial   *dialer
	sess   *session
	authed chan struct{} // closed once the credentials are accepted

	// closing's context is the parent of every lease and ends when Close
	// begins; it counts the Locker's goroutines, which Close waits for.
	closing locker.Closing

	pending atomic.Int64 // znodes of acquisitions not granted yet
}

var _ locker.Locker = (*Locker)(nil)

// Open is the registry's factory: a Locker on the ensemble at cfg.Addrs,
// with its own connection. See the package documentation for the params.
// It does not wait for the connection: the first acquisition does.
func Open(cfg backends.Config) (locker.Locker, error) {
	if err := cfg.Check("session", "root"); err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	timeout, err := cfg.Duration("session", DefaultSession)
	if err != nil {
		return nil, err
	}
	if timeout < 10*time.Millisecond || timeout > time.Hour {
		return nil, locker.Invalidf("param session=%v: want a session timeout between 10ms and 1h", timeout)
	}
	root := cfg.String("root", DefaultRoot)
	if err := checkRoot(root); err != nil {
		return nil, err
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, locker.Invalidf("username %q with a password of %d bytes: digest auth needs both", cfg.Username, len(cfg.Password))
	}
	if strings.Contains(cfg.Username, ":") {
		return nil, locker.Invalidf("username %q: must not contain ':' (digest auth is user:password)", cfg.Username)
	}

	l := &Locker{
		addrs:  append([]string(nil), cfg.Addrs...),
		root:   root,
		acl:    zk.WorldACL(zk.PermAll),
		authed: make(chan struct{}),
	}
	l.sess = newSession(timeout)
	l.dial = &dialer{tls: cfg.TLS, conns: map[*sniffConn]struct{}{}, onConnect: l.onConnect}
	if cfg.Username != "" {
		l.creds = []byte(cfg.Username + ":" + cfg.Password)
		l.acl = zk.DigestACL(zk.PermAll, cfg.Username, cfg.Password)
	} else {
		close(l.authed)
	}
	conn, events, err := zk.Connect(l.addrs, timeout,
		zk.WithDialer(l.dial.Dial),
		zk.WithLogger(quiet{}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(l.onEvent))
	if err != nil {
		return nil, locker.Invalidf("addresses %q: %v", cfg.Addrs, err)
	}
	l.conn, l.events = conn, events
	if l.creds != nil {
		l.closing.Go(l.authenticate)
	}
	l.closing.Go(l.heartbeats)
	return l, nil
}

// checkRoot returns an error naming root unless it is an absolute znode
// path other than "/" with no empty, "." or ".." segment.
func checkRoot(root string) error {
	if !strings.HasPrefix(root, "/") || root == "/" || strings.HasSuffix(root, "/") {
		return locker.Invalidf("param root=%q: want an absolute znode path such as %s", root, DefaultRoot)
	}
	for _, seg := range strings.Split(root[1:], "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsRune(seg, 0) {
			return locker.Invalidf("param root=%q: segment %q is not a valid znode name", root, seg)
		}
	}
	return nil
}

// quiet drops go-zookeeper's log lines: connection churn is reported
// through errors and lease ends instead.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Info implements locker.Locker.
func (l *Locker) Info() locker.Info {
	_, timeout := l.sess.current()
	return locker.Info{
		Name:    "zookeeper",
		Nodes:   append([]string(nil), l.addrs...),
		Quorum:  len(l.addrs)/2 + 1,
		Fencing: true,
		// A holder that stops keeps its znode until the server expires its
		// session: no earlier than the session timeout after the create,
		// less the client's own margin for clock rates.
		Session: timeout - margin(timeout),
		Guarantee: "the ensemble's majority orders a queue of ephemeral sequential znodes per key, so a grant is safe while a majority runs; " +
			"a lease lives as long as its session: the client ends it with ErrLost before the server can expire a silent session " +
			"(clock rates permitting), but a holder that stalls past that keeps writing - fence with the token (the znode's sequence number)",
	}
}

// Close ends every lease still held with ErrLost wrapping ErrClosed,
// closes the session (the server then deletes the Locker's znodes at once)
// and waits for every goroutine of the Locker and of its zk.Conn.
func (l *Locker) Close() error {
	if !l.closing.Begin() {
		return nil
	}
	for _, ls := range l.sess.close() {
		ls.h.Lose(locker.ErrClosed)
	}
	// Close sends closeSession and waits up to a second for the reply. A
	// connection to a silent server is then cut, so that go-zookeeper's
	// loop, which may be reading a connect reply with a long deadline,
	// ends now.
	l.conn.Close()
	l.dial.close()
	for range l.events {
		// The channel is closed when the zk.Conn's goroutines have ended.
	}
	l.closing.Wait()
	return nil
}

// call runs op, a blocking request on the connection, until it returns or
// ctx ends. go-zookeeper takes no context, and a request waits for as long
// as the client is reconnecting, so op runs on its own goroutine when ctx
// can end; if ctx ends first, call returns ctx.Err() at once and undo, when
// not nil, runs after op so that what op made (a znode) does not outlive
// the abandoned call.
func (l *Locker) call(ctx context.Context, op func() error, undo func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return op()
	}
	var state atomic.Int32 // 0 running, 1 answered, 2 abandoned
	done := make(chan error, 1)
	if !l.closing.Go(func() {
		err := op()
		if state.CompareAndSwap(0, 1) {
			done <- err
		} else if undo != nil {
			undo()
		}
	}) {
		return locker.ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if state.CompareAndSwap(0, 2) {
			return ctx.Err()
		}
		return <-done
	}
}

// nodeErr wraps a ZooKeeper error as the failure of the server the
// connection last used.
func (l *Locker) nodeErr(err error) error {
	return &locker.NodeError{Node: l.conn.Server(), Err: err}
}

// authenticate sends the digest credentials once the connection is up,
// retrying until the server has them; go-zookeeper sends them again on
// every reconnection.
func (l *Locker) authenticate() {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if err := l.conn.AddAuth("digest", l.creds); err == nil {
			close(l.authed)
			return
		}
		if !l.sleep(wait) {
			return
		}
	}
}

// sleep waits d, and returns false if the Locker closes first.
func (l *Locker) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.closing.Context().Done():
		return false
	}
}

// ready waits until the credentials are in place.
func (l *Locker) ready(ctx context.Context) error {
	select {
	case <-l.authed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for digest authentication: %w", ctx.Err())
	case <-l.closing.Context().Done():
		return locker.ErrClosed
	}
}
