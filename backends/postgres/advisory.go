package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockbench/lockbench/locker"
)

// holdsSQL asks whether this session holds the advisory lock whose 64-bit
// key is split, as pg_locks shows it, into classid (high half) and objid
// (low half); objsubid 1 marks the one-bigint form.
const holdsSQL = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
	AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1)`

// lockSession takes key's advisory lock on a session of its own: waiting
// in the server's queue (pg_advisory_lock) when wait is set, else once
// (pg_try_advisory_lock). The lease keeps the session until it ends.
func (l *Locker) lockSession(ctx context.Context, key string, o locker.Options, wait bool) (locker.Lease, error) {
	id := keyID(key)
	var conn *pgxpool.Conn
	ok := true
	err := retryStale(ctx, func(ctx context.Context) (err error) {
		if conn, err = l.pool.Acquire(ctx); err != nil {
			return err
		}
		if wait {
			_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", id)
		} else {
			err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", id).Scan(&ok)
		}
		if err != nil {
			// pgx closes a connection whose query it abandons (ctx
			// ended during the wait), so the session cannot be granted
			// the lock after we gave up on it; the pool drops it.
			conn.Release()
		}
		return err
	})
	if err != nil {
		return nil, l.failed(ctx, key, err)
	}
	if !ok {
		conn.Release()
		return nil, fmt.Errorf("%w: %q is held by another session", locker.ErrNotAcquired, key)
	}
	// The server never expires the lock: the TTL counts from the grant,
	// within the session's bound — the TTL the lease runs with, so that
	// its auto-extend watchdog (every TTL/3) extends it in time.
	o.TTL = l.validity(o.TTL)
	g := locker.Grant{Key: key, ValidUntil: time.Now().Add(o.TTL)}
	s := &session{l: l, key: key, id: id, conn: conn}
	if err := l.closing.Add(); err != nil { // Close began as we were granted: give it back
		_ = l.giveBack(context.Background(), conn, key, id)
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	lease := locker.NewLease(l.closing.Context(), s, g, o)
	s.start(lease)
	return lease, nil
}

// session is the advisory side of a lease: the session that holds the
// lock. While nobody uses it, a watcher reads it, so that its death — the
// server terminating it, restarting or crashing, the connection reset —
// ends the lease at once rather than at the next query.
type session struct {
	l    *Locker
	key  string
	id   int64
	conn *pgxpool.Conn

	mu        sync.Mutex // serialises the uses of conn
	lease     *locker.Handle
	ended     bool // conn is given back: unlocked, or closed
	stopWatch context.CancelFunc
	watched   chan struct{} // closed when the watcher has returned
}

var (
	_ locker.Holder = (*session)(nil)
	_ locker.Ender  = (*session)(nil)
)

// start attaches the lease and starts watching the session.
func (s *session) start(lease *locker.Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lease = lease
	s.watchLocked()
}

// watchLocked starts the watcher: it waits on the idle session (for a
// notification, which never comes: we listen to nothing) until the
// session dies, and then ends the lease with ErrLost, or until
// unwatchLocked stops it. pgx leaves a connection usable after such a
// wait is cancelled.
func (s *session) watchLocked() {
	if s.ended || s.stopWatch != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopWatch, s.watched = cancel, done
	pg := s.conn.Conn().PgConn()
	go func() {
		var err error
		for err == nil {
			err = pg.WaitForNotification(ctx)
		}
		close(done) // before Lose, whose Ended waits for it
		if ctx.Err() == nil {
			s.lease.Lose(fmt.Errorf("the session holding %q ended: %w", s.key, s.l.nodeError(err)))
		}
	}()
}

// unwatchLocked stops the watcher and waits for it to return, so that
// the caller can use the session.
func (s *session) unwatchLocked() {
	if s.stopWatch == nil {
		return
	}
	s.stopWatch()
	<-s.watched
	s.stopWatch = nil
}

// Extend implements locker.Holder: it asks the server whether the session
// still holds the lock (pg_locks), which then stays held until the
// session ends, and moves the deadline by ttl from the question (no
// further than the session's keepalive bound from it: the question is
// also what tells the server that the holder still lives).
func (s *session) Extend(ctx context.Context, ttl time.Duration) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return time.Time{}, fmt.Errorf("%w: %q: its session is gone", locker.ErrNotHeld, s.key)
	}
	s.unwatchLocked()
	start := time.Now()
	var held bool
	u := uint64(s.id)
	err := s.conn.QueryRow(ctx, holdsSQL, int64(u>>32), int64(u&0xffffffff)).Scan(&held)
	if err != nil {
		if s.conn.Conn().IsClosed() || sessionGone(err) {
			// The lease ends (ErrLost) and Ended gives the session back.
			return time.Time{}, fmt.Errorf("%w: %q: its session is gone: %w", locker.ErrNotHeld, s.key, s.l.nodeError(err))
		}
		s.watchLocked()
		return time.Time{}, s.l.nodeError(err)
	}
	s.watchLocked()
	if !held {
		return time.Time{}, fmt.Errorf("%w: %q: the session no longer holds its advisory lock", locker.ErrNotHeld, s.key)
	}
	return start.Add(s.l.validity(ttl)), nil
}

// validity is how long an advisory lease asking for ttl may count on its
// lock from the moment the server last heard from it: ttl, but no longer
// than the server keeps a silent session when a keepalive bounds it.
func (l *Locker) validity(ttl time.Duration) time.Duration {
	if l.session > 0 {
		return min(ttl, l.session)
	}
	return ttl
}

// Release implements locker.Holder: pg_advisory_unlock, then the session
// goes back to the pool.
func (s *session) Release(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return fmt.Errorf("%w: %q: its session is gone", locker.ErrNotHeld, s.key)
	}
	s.unwatchLocked()
	return s.finishLocked(ctx)
}

// Ended implements locker.Ender: a lease that expired, was lost or whose
// Locker closed gives its lock and session back (closing the session if
// the unlock fails, so that the server frees the lock when it sees it go).
func (s *session) Ended(error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.unwatchLocked()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.finishLocked(ctx)
}

// finishLocked gives the session back (giveBack) and marks it ended.
func (s *session) finishLocked(ctx context.Context) error {
	s.ended = true
	defer s.l.closing.Done()
	return s.l.giveBack(ctx, s.conn, s.key, s.id)
}

// giveBack unlocks key's advisory lock id on conn and gives conn back to
// the pool, or, when the unlock fails, closes the session, which frees
// whatever it held once the server sees it go.
func (l *Locker) giveBack(ctx context.Context, conn *pgxpool.Conn, key string, id int64) error {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", id).Scan(&ok)
	if err == nil && ok {
		conn.Release()
		return nil
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = conn.Conn().Close(closeCtx)
	cancel()
	conn.Release()
	switch {
	case err == nil:
		return fmt.Errorf("%w: %q: the session no longer held its advisory lock", locker.ErrNotHeld, key)
	case sessionGone(err):
		return fmt.Errorf("%w: %q: the server ended its session: %w", locker.ErrNotHeld, key, l.nodeError(err))
	}
	return fmt.Errorf("unlock %q: %w; the session is closed, and the server frees the lock when it sees that", key, l.nodeError(err))
}
