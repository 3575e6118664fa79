// Package postgres is the lock a team gets from the PostgreSQL server it
// already runs, in the two shapes such locks take (github.com/jackc/pgx/v5):
//
//   - Advisory: a session advisory lock, pg_advisory_lock on a 64-bit hash
//     (FNV-1a) of the key, held by a session (a connection) of its own for
//     as long as the lease lasts. The server never expires it: it holds as
//     long as the session lives, and the holder's own client gives it up
//     when the lease's TTL runs out (ValidUntil is the grant plus the TTL,
//     and Extend, after checking with the server that the session still
//     holds the lock, moves it). A waiter queues on the server, which
//     grants the lock the moment it is unlocked. The lease ends with
//     ErrLost as soon as its client sees the session die (the server
//     restarted or crashed, the session was terminated, the connection
//     reset); the server frees the lock when it sees the session die,
//     which after a network cut is when its TCP keepalives give up on the
//     silent client: hours later with the system's defaults, or within
//     the bound of the keepalive param (ConfigureKeepalive), which then
//     also caps what a lease promises, so that a cut-off holder's lease
//     ends first. No fencing token.
//   - Lease: a row per key in a table (holder, fencing token, expiry by
//     the server's clock), granted in one statement — an upsert that takes
//     the row only if it is free or expired and increments its token —
//     extended and released by statements that check the holder. It is
//     the shape of cirello.io/pglock and of Kleppmann's advice: the lease
//     expires whatever happens to the holder, and the token, which
//     strictly increases per key, lets the resource reject a holder that
//     paused past it. The holder's ValidUntil is its grant's start plus
//     the TTL less a drift allowance (1% + 2 ms) for the server's clock.
//
// Both rest on one server with no failover. A restart drops every advisory
// lock; the lease rows survive it, except, under the fast profile (fsync
// and synchronous_commit off), the last grants before a crash, which the
// server forgets — their keys can then be granted twice, with a token that
// goes back.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
)

// Mode is the kind of lock: Advisory or Lease.
type Mode string

const (
	// Advisory is a session advisory lock per key, held by a session of
	// its own; no TTL on the server, no fencing token.
	Advisory Mode = "advisory"
	// Lease is a lease row per key with an expiry by the server's clock
	// and a fencing token.
	Lease Mode = "lease"
)

// DefaultTable is the table of the Lease mode's rows.
const DefaultTable = "lockbench_leases"

// DefaultMaxConns is the size of the connection pool Open makes: in
// Advisory mode every lease held, and every Acquire waiting, takes a
// connection of its own.
const DefaultMaxConns = 16

// Options configures a Locker.
type Options struct {
	// Mode is Advisory or Lease; empty means Lease.
	Mode Mode
	// Table is the Lease mode's table, created if missing (a plain
	// identifier, optionally schema-qualified); empty means DefaultTable.
	// Advisory mode uses no table.
	Table string
	// Keepalive, in Advisory mode, is the bound within which the pool's
	// sessions die once their client falls silent, as ConfigureKeepalive
	// set it up on the pool's connection config (New checks that it did):
	// the server frees a cut-off holder's lock that long after it last
	// heard from it, so a lease then promises no more than that (less a
	// drift allowance) from its grant or its last Extend, whatever its
	// TTL. Zero: the sessions keep the server's keepalive settings (often
	// the system's: over two hours), and a lease promises its TTL.
	Keepalive time.Duration
}

// Locker is a lock on one PostgreSQL server. It implements locker.Locker
// and is safe for concurrent use.
type Locker struct {
	pool  *pgxpool.Pool
	owned bool // Close closes the pool
	mode  Mode
	addr  string
	sql   statements // the Lease mode's statements on its table
	table string
	// keepalive is Options.Keepalive; session, when positive, caps what
	// an advisory lease promises (sessionBound of keepalive).
	keepalive, session time.Duration

	// closing's context is the parent of every lease; it counts the
	// advisory sessions not yet given back to the pool, which Close waits
	// for.
	closing locker.Closing
	schema  sync.Mutex // serialises the creation of the table
}

var _ locker.Locker = (*Locker)(nil)

// identifier is what Options.Table may be: no quoting needed.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$`)

// New returns a Locker on the server pool connects to. New does not
// close pool; the caller must not close it before the Locker.
func New(pool *pgxpool.Pool, o Options) (*Locker, error) {
	if pool == nil {
		return nil, locker.Invalidf("postgres needs a connection pool, got nil")
	}
	if o.Mode == "" {
		o.Mode = Lease
	}
	if o.Mode != Advisory && o.Mode != Lease {
		return nil, locker.Invalidf("mode %q: want %s or %s", o.Mode, Advisory, Lease)
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if !identifier.MatchString(o.Table) {
		return nil, locker.Invalidf("table %q: want a lower-case identifier (letters, digits, _), optionally schema.table", o.Table)
	}
	cc := pool.Config().ConnConfig
	if o.Keepalive != 0 {
		if o.Mode != Advisory {
			return nil, locker.Invalidf("keepalive %v: mode=%s holds no session to keep alive (mode=%s does)", o.Keepalive, o.Mode, Advisory)
		}
		if err := checkKeepalive(cc, o.Keepalive); err != nil {
			return nil, err
		}
	}
	return &Locker{
		pool: pool, mode: o.Mode, table: o.Table, sql: leaseStatements(o.Table),
		addr:      fmt.Sprintf("%s:%d", cc.Host, cc.Port),
		keepalive: o.Keepalive, session: sessionBound(o.Keepalive),
	}, nil
}

// Open is the registry's factory: a Locker with a pool of its own on
// cfg.Addrs[0] — host:port, or a postgres:// URL — logging in as
// cfg.Username (default "postgres") with cfg.Password, over cfg.TLS when
// set. Params: mode (advisory or lease; default lease), database (default
// "postgres"), table (lease mode; default lockbench_leases), maxconns
// (the pool's size; default 16) and keepalive (advisory mode: a duration
// in whole seconds, at least 3s, within which a session dies on both ends
// once its peer falls silent — see ConfigureKeepalive and
// Options.Keepalive; default: the server's settings).
func Open(cfg backends.Config) (locker.Locker, error) {
	if err := cfg.Check("mode", "database", "table", "maxconns", "keepalive"); err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	if len(cfg.Addrs) > 1 {
		return nil, locker.Invalidf("%d addresses %q: the postgres backend uses one server", len(cfg.Addrs), cfg.Addrs)
	}
	mode := Mode(cfg.String("mode", string(Lease)))
	if _, ok := cfg.Params["table"]; ok && mode == Advisory {
		return nil, locker.Invalidf("param table=%q: mode=advisory uses no table", cfg.Params["table"])
	}
	maxConns, err := cfg.Int("maxconns", DefaultMaxConns)
	if err != nil {
		return nil, err
	}
	if maxConns < 1 || maxConns > 10000 {
		return nil, locker.Invalidf("param maxconns=%d: want 1 to 10000", maxConns)
	}
	keepalive, err := cfg.Duration("keepalive", 0)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.Params["keepalive"]; ok && mode != Advisory {
		return nil, locker.Invalidf("param keepalive=%q: mode=%s holds no session to keep alive (mode=%s "+
			"does)", cfg.Params["keepalive"], mode, Advisory)
	}
	pc, err := poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.Params["keepalive"]; ok {
		if err := ConfigureKeepalive(pc.ConnConfig, keepalive); err != nil {
			return nil, fmt.Errorf("param keepalive=%q: %w", cfg.Params["keepalive"], err)
		}
	}
	pc.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("postgres at %s: %w", cfg.Addrs[0], err)
	}
	l, err := New(pool, Options{Mode: mode, Table: cfg.String("table", ""), Keepalive: keepalive})
	if err != nil {
		pool.Close()
		return nil, err
	}
	l.owned = true
	return l, nil
}

// poolConfig turns cfg's address, credentials, database and TLS into a
// pool configuration.
func poolConfig(cfg backends.Config) (*pgxpool.Config, error) {
	addr := strings.TrimSpace(cfg.Addrs[0])
	connString := addr
	if !strings.Contains(addr, "://") {
		u := url.URL{Scheme: "postgres", Host: addr, Path: "/" + cfg.String("database", "postgres")}
		q := url.Values{"application_name": {"lockbench"}}
		if cfg.TLS == nil {
			q.Set("sslmode", "disable")
		}
		u.RawQuery = q.Encode()
		connString = u.String()
	} else if _, ok := cfg.Params["database"]; ok {
		return nil, locker.Invalidf("param database=%q: the URL %q names its database", cfg.Params["database"], addr)
	}
	pc, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, locker.Invalidf("address %q: %v", addr, err)
	}
	cc := pc.ConnConfig
	if !strings.Contains(addr, "@") { // else the URL names its user
		cc.User = "postgres"
	}
	if cfg.Username != "" {
		cc.User = cfg.Username
	}
	if cfg.Password != "" {
		cc.Password = cfg.Password
	}
	if cfg.TLS != nil {
		cc.TLSConfig = cfg.TLS.Clone()
		if cc.TLSConfig.ServerName == "" {
			cc.TLSConfig.ServerName = cc.Host
		}
		cc.Fallbacks = nil
	}
	return pc, nil
}

// Mode returns the Locker's mode.
func (l *Locker) Mode() Mode { return l.mode }

// Info implements locker.Locker.
func (l *Locker) Info() locker.Info {
	info := locker.Info{Name: "postgres", Nodes: []string{l.addr}, Quorum: 1}
	switch l.mode {
	case Advisory:
		info.Guarantee = "mode=advisory: a session advisory lock on one PostgreSQL server (single node, no failover), held by a session of its " +
			"own with no TTL on the server " +
			"(the holder's client unlocks at its TTL): safe while the server and the holder's connection live; a server restart or crash drops " +
			"every advisory lock; no fencing token"
		if l.session > 0 {
			info.Session = l.session
			info.Guarantee += fmt.Sprintf("; keepalive %v: the server ends a silent session, and frees its lock, no sooner than %v after last "+
				"hearing from its client, "+
				"and a lease promises at most %v from its grant or last Extend, so a cut-off holder's lease ends before its lock is "+
				"freed", l.keepalive, l.keepalive, l.session)
		} else {
			info.Guarantee += "; a cut-off holder's lock stays taken until the server's TCP keepalives give up on its session (Linux's defaults: " +
				"2 h 11 min), unless the keepalive param bounds it"
		}
	default:
		info.Fencing = true
		info.DriftRate, info.Drift = 0.01, 2*time.Millisecond // drift(ttl), the server's clock
		info.Guarantee = "mode=lease: a lease row per key in table " + l.table + " on one PostgreSQL server (single node, no failover), " +
			"expiring by the server's clock, " +
			"granted in one statement with a fencing token incremented on every grant: safe while the server keeps its committed rows (under " +
			"fsync/synchronous_commit off a crash forgets the last grants); " +
			"a holder that pauses past its TTL overlaps the next, and the tokens let the resource reject it"
	}
	return info
}

// Close ends every lease still held (with locker.ErrLost wrapping
// locker.ErrClosed): advisory locks are unlocked and their sessions given
// back, lease rows stay taken until they expire. It stops Acquires in
// progress and closes the pool if Open made it. Calls after the first
// return nil.
func (l *Locker) Close() error {
	if !l.closing.Begin() {
		return nil
	}
	l.closing.Wait()
	if l.owned {
		l.pool.Close()
	}
	return nil
}

// Acquire implements locker.Locker. In Advisory mode a waiter queues on
// the server (pg_advisory_lock), which grants it the lock as soon as it is
// free; the retry strategy only paces new attempts after a server error.
// In Lease mode it retries the grant statement, paced by the strategy.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.acquire(ctx, key, opts, true)
}

// TryAcquire implements locker.Locker: pg_try_advisory_lock, or the grant
// statement once.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.acquire(ctx, key, opts, false)
}

func (l *Locker) acquire(ctx context.Context, key string, opts []locker.Option, wait bool) (locker.Lease, error) {
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		return nil, err
	}
	if err := l.closing.Err(); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	// Close interrupts an acquisition in progress.
	ctx, cancel := l.closing.Bind(ctx)
	defer cancel()
	attempt := func(ctx context.Context) (locker.Lease, error) {
		if l.mode == Advisory {
			return l.lockSession(ctx, key, o, wait)
		}
		return l.grantRow(ctx, key, o)
	}
	if !wait {
		return attempt(ctx)
	}
	return locker.Retry(ctx, o.Retry, nil, attempt)
}

// failed turns the error of an attempt on key into what Acquire returns:
// the Locker's closing, ctx's end, or a server error that wraps
// locker.ErrNotAcquired (so that Acquire tries again) and a NodeError
// naming the server.
func (l *Locker) failed(ctx context.Context, key string, err error) error {
	if cerr := l.closing.Err(); cerr != nil {
		return fmt.Errorf("acquire %q: %w (%w)", key, cerr, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		if !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return fmt.Errorf("acquire %q: %w", key, err)
	}
	return fmt.Errorf("%w: %q: %w", locker.ErrNotAcquired, key, l.nodeError(err))
}

func (l *Locker) nodeError(err error) error { return &locker.NodeError{Node: l.addr, Err: err} }

// keyID is the advisory lock of key: its 64-bit FNV-1a hash. Two keys
// with the same hash exclude each other, which is safe; at 2^64 values it
// does not happen in practice.
func keyID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// sessionGone reports whether err says the server ended the session (it
// was terminated, or the server is shutting down or crashed): the locks it
// held are gone.
func sessionGone(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC" || strings.HasPrefix(pgErr.Code, "57P"))
}

// retryStale runs op, and once more if it failed because its connection
// had died: the pool hands out idle connections whose session ended while
// they idled (the server restarted, an operator terminated it), and the
// first statement on one fails. Every statement of this package may run
// twice: a retry of an advisory lock runs on a new session (the old one
// and whatever it held are gone), and the lease statements are written so
// that a second run for the same holder does what the first did.
func retryStale(ctx context.Context, op func(context.Context) error) error {
	err := op(ctx)
	if err == nil || ctx.Err() != nil || !connLost(err) {
		return err
	}
	return op(ctx)
}

// connLost reports whether err is the failure of a connection rather
// than the server's answer to a statement: a network error, or the server
// ending the session.
func connLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return sessionGone(err)
	}
	return !errors.Is(err, pgx.ErrNoRows)
}

// drift is the allowance for the server's clock in a lease's validity:
// 1% of the TTL plus 2 ms, as Redlock allows for its nodes' clocks.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }
