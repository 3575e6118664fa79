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
	// DriftRate and Drift are the allowance for clock drift, and for any
	// other slack the backend knows of between the call of Acquire and
	// the start of the grant's life on its servers, that it takes off a
	// TTL: DriftRate of the TTL plus Drift (Redlock's TTL×0.01 + 2 ms).
	// They are part of the contract a checker holds the backend to (see
	// Promise), not a report of what one lease got.
	DriftRate float64
	Drift     time.Duration
	// Session, when positive, caps what a grant promises whatever TTL was
	// asked, already net of its own drift allowance: the key lives in a
	// session the server ends on its own once the holder falls silent
	// (ZooKeeper's session timeout, less the client's margin), or in keys
	// the backend keeps alive only that far ahead (rueidislock's horizon).
	Session time.Duration
	// Guarantee says in a sentence what mutual exclusion rests on and how
	// it can fail.
	Guarantee string
}

// Promise is the backend's contract for a grant with the TTL asked: from
// the moment Acquire was called, nobody else is granted the key for at
// least this long, whatever happens to the holder (a pause, a cut
// connection) and whatever its lease reports. It is the TTL rounded up to
// TTLResolution, less the declared drift (DriftRate of it, plus Drift),
// capped at Session when one is declared; never negative.
//
// A checker draws the line between a lock bug (the key granted to another
// before that moment) and an expired holder (after it) with Promise, not
// with Lease.ValidUntil: a backend that under-reported its own validity
// would otherwise turn its double grants into expired holders. A lease
// whose ValidUntil lies before the call plus Promise, or after the return
// plus MaxValidity, departs from its contract, which is worth reporting
// either way.
func (i Info) Promise(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	t := i.applied(ttl)
	p := t - time.Duration(i.DriftRate*float64(t)) - i.Drift
	if i.Session > 0 {
		p = min(p, i.Session)
	}
	return max(p, 0)
}

// MaxValidity is the longest a grant with the TTL asked can keep its key
// from the moment it was granted: the TTL as the backend applies it
// (rounded up to TTLResolution), capped at Session when one is declared.
// A lease reporting a ValidUntil later than its Acquire's return plus
// MaxValidity claims more than its lock can give: a holder that trusts it
// may write after the key went to someone else.
func (i Info) MaxValidity(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	t := i.applied(ttl)
	if i.Session > 0 {
		t = min(t, i.Session)
	}
	return t
}

// applied is ttl rounded up to TTLResolution.
func (i Info) applied(ttl time.Duration) time.Duration {
	if r := i.TTLResolution; r > 0 {
		return (ttl + r - 1) / r * r
	}
	return ttl
}
