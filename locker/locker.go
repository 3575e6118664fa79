package locker

import (
	"context"
	"time"
)

// Locker grants leases on keys. Implementations are safe for concurrent use
// by many goroutines; a program normally opens one Locker per backend and
// shares it.
type Locker interface {
	// Acquire blocks until key is held, ctx ends (the error then wraps
	// ctx.Err()), the retry strategy gives up (the error wraps
	// ErrNotAcquired) or a terminal error occurs.
	Acquire(ctx context.Context, key string, opts ...Option) (Lease, error)
	// TryAcquire makes a single attempt. It returns an error wrapping
	// ErrNotAcquired when someone else holds key.
	TryAcquire(ctx context.Context, key string, opts ...Option) (Lease, error)
	// Info describes the backend: its nodes, quorum, whether it issues
	// fencing tokens and what its safety rests on.
	Info() Info
	// Close ends every lease still held (with ErrLost wrapping ErrClosed)
	// and releases the Locker's connections. Calls after the first return
	// nil.
	Close() error
}

// Lease is one grant of a key. It is an immutable handle, safe for
// concurrent use; its Done and Err methods follow context.Context.
type Lease interface {
	// Key is the key this lease holds.
	Key() string
	// Token returns the fencing token of this grant and true, or 0 and false
	// when the backend issues none. Tokens of one key strictly increase
	// across grants, so a resource that rejects a token lower than one it
	// has seen rejects the writes of a holder whose lease has ended.
	Token() (uint64, bool)
	// ValidUntil is the local deadline of the lease: the time by which the
	// backend guarantees nobody else can be granted the key, already
	// reduced by the time the grant took and by the allowance for clock
	// drift. Extend moves it.
	ValidUntil() time.Time
	// Done returns a channel that is closed when the lease ends: released,
	// expired or lost.
	Done() <-chan struct{}
	// Err returns nil while the lease is held, then ErrReleased, ErrExpired
	// or an error wrapping ErrLost and its cause.
	Err() error
	// Extend asks the backend to keep the key for ttl from now. On success
	// ValidUntil moves; if the backend reports that the key is no longer
	// ours the lease ends with ErrLost. Extending an ended lease returns an
	// error wrapping ErrNotHeld.
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the key up. The lease ends locally whatever the
	// backend answers: Err becomes ErrReleased, or ErrLost when the backend
	// reports that it no longer held the key. Any other error means the key
	// may stay taken until its TTL runs out; Err then wraps ErrReleased and
	// that error, so that it does not claim a release nobody confirmed. Releasing an ended lease
	// returns an error wrapping ErrNotHeld and leaves the backend alone, so
	// a stale holder cannot free a key granted to someone else.
	Release(ctx context.Context) error
}

// Info describes a backend and the guarantee it gives, so that reports can
// say what each measurement rests on.
type Info struct {
	// Name is the name the backend is registered under.
	Name string
	// Nodes lists the servers the Locker talks to.
	Nodes []string
	// Quorum is how many nodes must agree to grant a lease (1 for a single
	// server, N/2+1 for Redlock, the ensemble majority for ZooKeeper and
	// etcd, which the server side enforces).
	Quorum int
	// Fencing reports whether leases carry fencing tokens.
	Fencing bool
	// TTLResolution is the granularity the backend applies to a TTL; a TTL
	// is rounded up to a multiple of it (etcd counts lease TTLs in seconds).
	// Zero means the TTL is honoured to the millisecond.
	TTLResolution time.Duration
	// Guarantee says in a sentence what mutual exclusion rests on and how
	// it can fail.
	Guarantee string
}
