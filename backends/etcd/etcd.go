// Package etcd is the etcd lock: for each key a queue of etcd keys under a
// per-key prefix, each attached to a lease of its own, where the key with
// the lowest create revision holds the lock — the queue of
// go.etcd.io/etcd/client/v3/concurrency.Mutex, with a lease per grant
// instead of one per session, so that every grant has its own TTL that
// the cluster enforces.
//
// # The recipe
//
// Lock K lives under <prefix><escaped K>/ (prefix defaults to
// /lockbench/locks/; '/' and '%' in K are percent-escaped so that distinct
// locks never share a prefix). An acquisition takes a lease with the TTL
// asked for, then in one transaction puts <prefix><K>/<lease id> attached
// to it and reads the two newest keys of the queue: when its own key is
// alone it holds the lock; otherwise it watches only the deletion of the
// key just before its own (no herd effect) and checks again when that one
// goes. While it waits it keeps its lease alive; when its ctx ends or its
// retry strategy gives up it revokes the lease, which deletes its key. TryAcquire puts its key only
// if the queue is empty (a compare on the whole prefix), so a failed
// attempt leaves nothing behind.
//
// The fencing token is the lock key's create revision: the cluster's
// revision strictly increases with every write, so the tokens of one lock
// strictly increase across its grants, and are comparable across locks.
//
// # TTL, ValidUntil and Extend
//
// etcd counts lease TTLs in whole seconds, and a server raises a TTL to
// its minimum (1.5 election timeouts, rounded up to seconds). A TTL is
// therefore rounded up to whole seconds (Info.TTLResolution is 1s;
// sub-second TTLs are accepted and become 1s), and ValidUntil is the time
// the Grant (or the latest keep-alive) was sent plus the TTL the server
// answered, less an allowance of 1% + 2 ms for clock-rate drift and late
// timers: the server cannot expire the lease earlier, since it received
// the request after we sent it. A grant whose lease was last renewed more
// than a tenth of its TTL ago (a long wait in the queue) renews it first,
// so a lease starts with nine tenths of its TTL or more, less the round
// trip of the request that granted it.
//
// Extend with a TTL that rounds to the lease's own renews the lease
// (KeepAliveOnce) and checks that the lock key still exists with its
// create revision; the lease ends with ErrLost when the lease or the key
// is gone. etcd cannot change a lease's TTL, so Extend with a longer TTL
// moves the lock key to a new lease in a transaction that checks the key
// is still ours (its create revision, and so the token, stays), and
// revokes the old lease; a shorter TTL renews the lease to its longer
// TTL. Auto-extension (locker.WithAutoExtend) is the locker package's
// watchdog calling Extend.
//
// A lease that is not released expires at its TTL on the server, which
// deletes the lock key and so frees the lock; the lease also ends locally
// at ValidUntil (ErrExpired), and the Locker then revokes it at once.
//
// # How a loss is detected
//
// A holder watches its own lock key: its deletion before ValidUntil — the
// lease was revoked behind the holder's back, or the key deleted — ends
// the lease with ErrLost. The watch starts once the lease has been held
// for 20 ms, so that short holds do not pay for creating and cancelling it
// (which costs about as much as the lock itself); a deletion in between
// is still seen, just that much later (see below). Extend finding the lease
// or the key gone ends the lease with ErrLost at once. A holder cut off
// from the cluster learns nothing; its lease ends at ValidUntil, before
// the server can expire it. A holder that stalls (GC, SIGSTOP) past that
// keeps writing: that is what the fencing token is for.
//
// # Watches that start now
//
// Both watches (a waiter's on the key ahead, a holder's on its own) start
// at the member's current revision and not at the revision the key was
// seen at: etcd serves a watch that starts in the past from its
// "unsynced" set, which it catches up only every 100 ms, so a waiter
// would often wake up to 100 ms after its predecessor went — that is
// where concurrency.Mutex's ~100 ms hand-offs under contention come from.
// When revisions have passed between the read that saw the key and the
// watch's start, the key is read once more: if it is still the same
// incarnation (create revision), its deletion comes after the watch's
// start and is seen; if not, the queue is checked again.
//
// # Lease reuse
//
// Release deletes the lock key and reads back what it deleted, so that a
// key deleted behind our back is reported as ErrNotHeld (the key's name
// holds the id of the lease it was created with, which no other grant
// uses meanwhile). Its lease, then attached to nothing, is kept in a small
// per-Locker pool and reused by the next acquisition with the same TTL if
// it was renewed less than a tenth of its TTL ago; otherwise it is revoked
// at once. A lease is used by one grant at a time, so every grant still
// has a lease of its own that the server expires at its TTL; reuse only
// saves the Grant and Revoke round trips (two raft writes) per lock +
// unlock, which would otherwise halve the throughput of an uncontended
// lock. The leasepool param sets the pool size; 0 grants a lease per
// acquisition and revokes it at release.
//
// # Params
//
//   - dialtimeout: how long connecting (and authenticating) may take (a Go
//     duration, default 5s).
//   - prefix: the etcd key prefix under which the lock queues live
//     (default /lockbench/locks/; a missing trailing '/' is added).
//   - leasepool: how many released leases the Locker keeps for reuse
//     (default 8; 0 disables reuse).
//   - keepalive: the interval of gRPC keep-alive pings, which detect a
//     connection to a member that stopped answering (default 0: off; at
//     least 1s, and an etcd server refuses pings more frequent than its
//     --grpc-keepalive-min-time, 5s by default).
//
// Config.Addrs are the members' client addresses (host:port, or URLs);
// http:// is added to a bare host:port, or https:// when Config.TLS is
// set. Username and Password authenticate as an etcd user; TLS, when set,
// is used for every connection.
//
// Close ends every lease still held with ErrLost wrapping ErrClosed and
// revokes every lease the Locker has (waiting at most CloseTimeout), so
// that their keys are freed now rather than at their TTL.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
)

// Defaults of the params.
const (
	// DefaultDialTimeout bounds connecting when the dialtimeout param is
	// not set.
	DefaultDialTimeout = 5 * time.Second
	// DefaultPrefix is the etcd key prefix of the lock queues.
	DefaultPrefix = "/lockbench/locks/"
	// DefaultLeasePool is how many released leases a Locker keeps for
	// reuse, enough for a few goroutines locking in a loop.
	DefaultLeasePool = 8
)

// CloseTimeout bounds how long Close waits for the cluster to revoke the
// Locker's leases; leases it could not revoke expire at their TTL.
const CloseTimeout = 2 * time.Second

// maxLeaseSeconds is the longest lease TTL an etcd server grants.
const maxLeaseSeconds = 9_000_000_000

// Locker is a lock on an etcd cluster. It implements locker.Locker; open
// it with Open (or backends.Open("etcd", cfg)).
type Locker struct {
	cli       *clientv3.Client
	endpoints []string
	nodes     string // the endpoints, for NodeError
	prefix    string
	poolSize  int

	// closing's context is the parent of every lease, every background
	// request and every acquisition; it counts the acquisitions in
	// progress and the background goroutines, which Close waits for.
	closing locker.Closing

	mu   sync.Mutex
	held map[*lease]struct{}
	// owned holds every lease the Locker granted and has not yet seen
	// revoked: Close revokes them.
	owned map[clientv3.LeaseID]struct{}
	pool  map[int64][]leaseRec // released leases by TTL asked, in seconds
	idle  int                  // leases in pool
}

var _ locker.Locker = (*Locker)(nil)

// Open is the registry's factory: a Locker on the cluster at cfg.Addrs,
// with its own client. See the package documentation for the params. It
// does not wait for a connection unless credentials are given (etcd
// authenticates when the client is made).
func Open(cfg backends.Config) (locker.Locker, error) {
	if err := cfg.Check("dialtimeout", "prefix", "leasepool", "keepalive"); err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	dial, err := cfg.Duration("dialtimeout", DefaultDialTimeout)
	if err != nil {
		return nil, err
	}
	if dial <= 0 || dial > 10*time.Minute {
		return nil, locker.Invalidf("param dialtimeout=%v: want a duration above 0 and at most 10m", dial)
	}
	prefix := cfg.String("prefix", DefaultPrefix)
	if prefix == "" || prefix == "/" {
		return nil, locker.Invalidf("param prefix=%q: want a key prefix such as %s", prefix, DefaultPrefix)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	pool, err := cfg.Int("leasepool", DefaultLeasePool)
	if err != nil {
		return nil, err
	}
	if pool < 0 || pool > 1<<16 {
		return nil, locker.Invalidf("param leasepool=%d: want 0 to 65536", pool)
	}
	keepalive, err := cfg.Duration("keepalive", 0)
	if err != nil {
		return nil, err
	}
	if keepalive != 0 && keepalive < time.Second {
		return nil, locker.Invalidf("param keepalive=%v: want 0 (off) or at least 1s", keepalive)
	}
	if cfg.Password != "" && cfg.Username == "" {
		return nil, locker.Invalidf("a password of %d bytes without a username: etcd auth needs a user", len(cfg.Password))
	}
	endpoints, err := endpointURLs(cfg.Addrs, cfg.TLS != nil)
	if err != nil {
		return nil, err
	}
	cc := clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          dial,
		DialKeepAliveTime:    keepalive,
		DialKeepAliveTimeout: keepalive,
		Username:             cfg.Username,
		Password:             cfg.Password,
		Logger:               zap.NewNop(),
	}
	if cfg.TLS != nil {
		cc.TLS = cfg.TLS.Clone()
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, &locker.NodeError{Node: strings.Join(endpoints, ","), Err: err}
	}
	l := &Locker{
		cli:       cli,
		endpoints: endpoints,
		nodes:     strings.Join(endpoints, ","),
		prefix:    prefix,
		poolSize:  pool,
		held:      map[*lease]struct{}{},
		owned:     map[clientv3.LeaseID]struct{}{},
		pool:      map[int64][]leaseRec{},
	}
	return l, nil
}

// endpointURLs turns addresses into the URLs clientv3 dials: a bare
// host:port gets http://, or https:// with TLS.
func endpointURLs(addrs []string, tls bool) ([]string, error) {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		a = strings.TrimSpace(a)
		if strings.Contains(a, "://") {
			u, err := url.Parse(a)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, locker.Invalidf("address %q: want host:port or an http(s):// URL", a)
			}
			out[i] = a
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, locker.Invalidf("address %q: want host:port or an http(s):// URL", a)
		}
		out[i] = scheme + a
	}
	return out, nil
}

// Info implements locker.Locker.
func (l *Locker) Info() locker.Info {
	return locker.Info{
		Name:          "etcd",
		Nodes:         append([]string(nil), l.endpoints...),
		Quorum:        len(l.endpoints)/2 + 1,
		Fencing:       true,
		TTLResolution: TTLResolution,
		// A lease reused from the pool was renewed up to a tenth of its
		// TTL before Acquire was called; the server expires it no earlier
		// than that renewal plus the TTL, less 1% + 2 ms for clock rates.
		DriftRate: 0.11,
		Drift:     2 * time.Millisecond,
		Guarantee: "the cluster's raft majority orders a queue of keys per lock (the lowest create revision holds), each attached " +
			"to a lease of its own, " +
			"so a grant is safe while a majority runs; the server frees the lock when the lease expires (its TTL in whole seconds), " +
			"so a holder that stalls past its TTL keeps writing - fence with the token (the lock key's create revision)",
	}
}

// Prefix returns the etcd prefix under which the queue of key lives: its
// keys are the holder (lowest create revision) and the waiters, each
// attached to its lease. It is there for operators and tools that inspect
// or break a lock.
func (l *Locker) Prefix(key string) string { return l.prefix + escape(key) + "/" }

// escape makes a lock key one etcd path segment: '%' and '/' become %25
// and %2F, so distinct keys get distinct, non-nested prefixes.
func escape(key string) string {
	if !strings.ContainsAny(key, "%/") {
		return key
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(key)
}

// Close ends every lease still held with ErrLost wrapping ErrClosed,
// waits for the acquisitions in progress (which end with ErrClosed) and
// the Locker's goroutines, revokes every lease the Locker has (within
// CloseTimeout) and closes the client, waiting for its goroutines.
func (l *Locker) Close() error {
	if !l.closing.Begin() {
		return nil
	}
	// A lease registers under mu unless closing has begun: every lease
	// is either refused or here.
	l.mu.Lock()
	held := make([]*lease, 0, len(l.held))
	for ls := range l.held {
		held = append(held, ls)
	}
	clear(l.held)
	l.mu.Unlock()

	for _, ls := range held {
		ls.h.Lose(locker.ErrClosed)
	}
	l.closing.Wait()
	l.sweep()
	return l.cli.Close()
}

// sweep revokes every lease the Locker still owns, all at once, within
// CloseTimeout. Called by Close once nothing else uses the client.
func (l *Locker) sweep() {
	l.mu.Lock()
	ids := make([]clientv3.LeaseID, 0, len(l.owned))
	for id := range l.owned {
		ids = append(ids, id)
	}
	clear(l.owned)
	clear(l.pool)
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { _, _ = l.cli.Revoke(ctx, id) })
	}
	wg.Wait()
}

// sleep waits d, and returns false if ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// nodeErr wraps a cluster's error as a NodeError naming the endpoints
// (clientv3 balances requests over them and does not say which answered).
func (l *Locker) nodeErr(err error) error {
	var ne *locker.NodeError
	if errors.As(err, &ne) {
		return err
	}
	return &locker.NodeError{Node: l.nodes, Err: err}
}

// outcome turns the error of a request made with op (caller's ctx bound
// to the Locker's closing) into what the caller sees: the caller's ctx
// error, ErrClosed, or the cluster's error as a NodeError.
func (l *Locker) outcome(caller, op context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := caller.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return err
		}
		return fmt.Errorf("%w: %w", cerr, l.nodeErr(err))
	}
	if op.Err() != nil && errors.Is(context.Cause(op), locker.ErrClosed) {
		return locker.ErrClosed
	}
	if errors.Is(err, locker.ErrClosed) || errors.Is(err, locker.ErrInvalid) || errors.Is(err, locker.ErrNotAcquired) ||
		errors.Is(err, locker.ErrNotHeld) {
		return err
	}
	return l.nodeErr(err)
}
