// Package rueidislock adapts github.com/redis/rueidis/rueidislock, the
// Redis maintainers' Go lock, to the locker contract, as a comparison
// backend: the strongest published Go peer of our single-instance Redis
// lock, run on the same server.
//
// rueidislock's model is a context, not a lease. WithContext(ctx, name)
// returns a context that stays alive while the lock is held, and a
// cancel function that releases it. Behind it, the lock is KeyMajority of
// 2·KeyMajority−1 keys (prefix:i:name) set with SET NX PXAT now+KeyValidity
// one after another through one rueidis client, each kept alive by a
// goroutine that extends it to now+KeyValidity every ExtendInterval; the
// client caches the keys (RESP3 client-side caching), so Redis tells it at
// once when one of them changes or expires: a waiter retries the moment
// the key is freed, and a holder whose key was taken or lost re-checks
// it. The context ends when a majority of the keys are lost — an
// extension refused, a key taken — or when the holder cancels. There is
// no TTL per lock, no explicit extension and no fencing token.
//
// The mapping onto locker.Lease:
//
//   - Acquire and TryAcquire are WithContext and TryWithContext on a
//     context of the Locker's (Acquire's ctx only bounds the wait: a lease
//     outlives it). rueidislock waits its own way — woken by the key's
//     invalidation — so locker.WithRetry is not used. A wait is cut and
//     begun again after Rewait (see below).
//   - ValidUntil is the grant plus the lease's TTL, and Extend(ttl) moves
//     it to now plus ttl without a request, while rueidislock says the
//     lock is held (its context lives): rueidislock keeps the keys at
//     least KeyValidity−ExtendInterval ahead of now while its extensions
//     succeed, so a deadline within the horizon (4/5 of that) is one the
//     keys outlast even if the holder's process stops right after. Both
//     are capped at the horizon (2 s with rueidislock's defaults, 5 s
//     validity and 2.5 s interval), which a longer TTL cannot pass.
//     rueidislock reports a failed extension only when the extension's
//     own deadline (one KeyValidity ahead) passes, so under a partition or
//     a stalled server the key can expire while its context still lives:
//     the lease then outlives its key by up to the horizon, and the
//     checker rightly counts the overlap against the lock.
//   - At ValidUntil the lease expires (ErrExpired) and the adapter
//     cancels the lock, which deletes its keys; Release does the same.
//     Done closes with ErrLost when rueidislock's context ends on its own.
//   - Token() reports none.
//
// A lost wake-up in rueidislock v1.0.79: in try, each key's monitoring
// goroutine starts before try counts that key's failure, so the goroutine
// of a key that was not acquired can find fewer failures than a majority
// and run the bookkeeping of a released lock — decrementing the waiter's
// own count on its gate and, when it reaches zero (the waiter is the only
// one of its Locker), deleting the gate. The waiter then waits on a gate
// no invalidation reaches, forever, while the key is free. With 16
// rueidislock Lockers on one key (separate processes' worth) about one run
// in five of 16×20 acquisitions hung; with one Locker shared by goroutines
// it did not. The adapter therefore bounds each wait: after Rewait
// (default 1 s) without a grant it cancels the wait and calls WithContext
// again; Rewaits counts how often. A wait that was lost costs Rewait; one
// that was merely long costs a retry.
//
// KeyMajority is 1 here by default: one key on one Redis server, like
// our redis backend. rueidislock cannot run on several independent Redis
// masters, as Redlock does: all its keys go through one rueidis client,
// which talks to one server, one Sentinel-managed master or one Redis
// Cluster (where the keys may hash to different shards); rueidis.NewClient
// refuses several addresses of servers that are not a cluster. On one
// server, a larger KeyMajority only adds round trips.
package rueidislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	rl "github.com/redis/rueidis/rueidislock"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
)

// The defaults of Open: rueidislock's own, except KeyMajority (1 key on
// one server rather than 2 of 3).
const (
	DefaultKeyMajority  = 1
	DefaultKeyValidity  = 5 * time.Second
	DefaultTryNextAfter = 20 * time.Millisecond
	// DefaultRewait bounds one rueidislock wait (see the package doc).
	DefaultRewait = time.Second
)

// Locker is a rueidislock Locker behind the locker contract. It is safe
// for concurrent use.
type Locker struct {
	rl       rl.Locker
	addr     string
	majority int32
	// horizon is how far ValidUntil may reach past a grant or an Extend.
	horizon time.Duration
	// rewait bounds one WithContext wait; 0 lets it wait as long as ctx.
	rewait  time.Duration
	rewaits atomic.Int64

	// closing's context is the parent of every lock; it counts the locks
	// not yet cancelled, which Close waits for.
	closing locker.Closing
}

var _ locker.Locker = (*Locker)(nil)

// New returns a Locker that makes its rueidislock Locker from o, with
// rueidislock's defaults for the fields left zero (KeyMajority 2 of 3
// keys, KeyValidity 5 s, ExtendInterval half of it). addr names the
// server in errors and Info. The Locker closes what it makes.
func New(addr string, o rl.LockerOption) (*Locker, error) {
	if o.KeyMajority <= 0 {
		o.KeyMajority = 2
	}
	if o.KeyValidity <= 0 {
		o.KeyValidity = DefaultKeyValidity
	}
	if o.ExtendInterval <= 0 {
		o.ExtendInterval = o.KeyValidity / 2
	}
	if o.ExtendInterval >= o.KeyValidity {
		return nil, locker.Invalidf("extend interval %v: must be shorter than the key validity %v", o.ExtendInterval, o.KeyValidity)
	}
	r, err := rl.NewLocker(o)
	if err != nil {
		return nil, fmt.Errorf("rueidislock at %s: %w", addr, &locker.NodeError{Node: addr, Err: err})
	}
	return &Locker{
		rl: r, addr: addr, majority: o.KeyMajority,
		horizon: (o.KeyValidity - o.ExtendInterval) * 4 / 5,
		rewait:  DefaultRewait,
	}, nil
}

// SetRewait sets how long one rueidislock wait may last before Acquire
// begins it again (see the package doc); 0 lets a wait last as long as
// Acquire's ctx, as rueidislock alone does. Call it before any Acquire.
func (l *Locker) SetRewait(d time.Duration) { l.rewait = max(d, 0) }

// Rewaits counts the waits Acquire cut after the rewait bound and began
// again: an upper bound on the lost wake-ups it recovered from.
func (l *Locker) Rewaits() int64 { return l.rewaits.Load() }

// Open is the registry's factory: a Locker on the one Redis server
// cfg.Addrs[0] (cfg's credentials and TLS). Params: majority (keys to
// hold out of 2·majority−1; default 1), validity (the keys' validity,
// rueidislock's KeyValidity; default 5s), extendinterval (default half
// the validity), trynextafter (the timeout of one key's acquisition;
// default 20ms) and rewait (the bound on one wait, 0 for none; default
// 1s).
func Open(cfg backends.Config) (locker.Locker, error) {
	if err := cfg.Check("majority", "validity", "extendinterval", "trynextafter", "rewait"); err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	if len(cfg.Addrs) > 1 {
		return nil, locker.Invalidf("%d addresses %q: rueidislock runs on one Redis server (its keys go through one client; it cannot use "+
			"independent masters as Redlock does)", len(cfg.Addrs), cfg.Addrs)
	}
	majority, err := cfg.Int("majority", DefaultKeyMajority)
	if err != nil {
		return nil, err
	}
	if majority < 1 || majority > 16 {
		return nil, locker.Invalidf("param majority=%d: want 1 to 16", majority)
	}
	validity, err := positive(cfg, "validity", DefaultKeyValidity)
	if err != nil {
		return nil, err
	}
	if validity < 10*time.Millisecond {
		return nil, locker.Invalidf("param validity=%v: want at least 10ms", validity)
	}
	interval, err := positive(cfg, "extendinterval", validity/2)
	if err != nil {
		return nil, err
	}
	if interval >= validity {
		return nil, locker.Invalidf("param extendinterval=%v: must be shorter than the validity %v", interval, validity)
	}
	tryNext, err := positive(cfg, "trynextafter", DefaultTryNextAfter)
	if err != nil {
		return nil, err
	}
	rewait, err := cfg.Duration("rewait", DefaultRewait)
	if err != nil {
		return nil, err
	}
	if rewait < 0 {
		return nil, locker.Invalidf("param rewait=%v: must not be negative", rewait)
	}
	l, err := New(cfg.Addrs[0], rl.LockerOption{
		ClientOption: rueidis.ClientOption{
			InitAddress: []string{cfg.Addrs[0]},
			Username:    cfg.Username,
			Password:    cfg.Password,
			TLSConfig:   cfg.TLS,
		},
		KeyMajority:    int32(majority),
		KeyValidity:    validity,
		ExtendInterval: interval,
		TryNextAfter:   tryNext,
	})
	if err != nil {
		return nil, err
	}
	l.SetRewait(rewait)
	return l, nil
}

// positive returns param name as a positive duration, or def.
func positive(cfg backends.Config, name string, def time.Duration) (time.Duration, error) {
	d, err := cfg.Duration(name, def)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, locker.Invalidf("param %s=%v: must be positive", name, d)
	}
	return d, nil
}

// Info implements locker.Locker.
func (l *Locker) Info() locker.Info {
	return locker.Info{
		Name:    "rueidislock",
		Nodes:   []string{l.addr},
		Quorum:  1,
		Fencing: false,
		// The keys outlast the horizon even when the holder stops right
		// after the grant; the adapter ends every lease by then.
		Session: l.horizon,
		Guarantee: fmt.Sprintf("rueidislock (the Redis maintainers' Go lock) holds %d of %d keys on one Redis server, extended in the "+
			"background and watched with client-side caching: "+
			"safe while that server runs and keeps its data; no fencing token, so a holder that pauses past its keys' validity overlaps the next; "+
			"a lease's validity is capped at %v (the keys' validity less the extension interval, less a "+
			"margin)", l.majority, 2*l.majority-1, l.horizon),
	}
}

// Horizon is how far a lease's ValidUntil may reach past its grant or an
// Extend: the TTL is capped at it.
func (l *Locker) Horizon() time.Duration { return l.horizon }

// Close ends every lease still held (with locker.ErrLost wrapping
// locker.ErrClosed), which deletes their keys, stops Acquires in progress
// and closes rueidislock's client. Calls after the first return nil.
func (l *Locker) Close() error {
	if !l.closing.Begin() {
		return nil
	}
	l.closing.Wait()
	l.rl.Close()
	return nil
}

// Acquire implements locker.Locker with rueidislock's WithContext, which
// waits until a key invalidation (or a release in this process) says the
// lock may be free, and tries again.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.lock(ctx, key, opts, true)
}

// TryAcquire implements locker.Locker with rueidislock's TryWithContext.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.lock(ctx, key, opts, false)
}

func (l *Locker) lock(ctx context.Context, key string, opts []locker.Option, wait bool) (locker.Lease, error) {
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		return nil, err
	}
	if err := l.closing.Err(); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	var (
		lctx      context.Context
		release   context.CancelFunc
		cancelSrc context.CancelFunc
	)
	for {
		// The lock lives in a context of the Locker's; ctx only bounds
		// the wait, and so does the rewait timer.
		var src context.Context
		src, cancelSrc = context.WithCancel(l.closing.Context())
		stop := context.AfterFunc(ctx, cancelSrc)
		if wait {
			var rewait *time.Timer
			if l.rewait > 0 {
				rewait = time.AfterFunc(l.rewait, cancelSrc)
			}
			lctx, release, err = l.rl.WithContext(src, key)
			if rewait != nil && !rewait.Stop() && ctx.Err() == nil && l.closing.Err() == nil {
				// The wait was cut: give back a grant that came as it
				// was, and wait again.
				if err == nil {
					release()
				}
				stop()
				cancelSrc()
				l.rewaits.Add(1)
				continue
			}
		} else {
			lctx, release, err = l.rl.TryWithContext(src, key)
		}
		if !stop() && err == nil {
			release() // granted as ctx ended: give it back
			err = context.Cause(ctx)
		}
		break
	}
	granted := time.Now()
	if err != nil {
		cancelSrc()
		return nil, l.failed(ctx, key, err)
	}
	if err := l.closing.Add(); err != nil { // Close began as we were granted: give it back
		release()
		cancelSrc()
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	h := &hold{l: l, key: key, ctx: lctx, release: func() { release(); cancelSrc() }}
	g := locker.Grant{Key: key, ValidUntil: granted.Add(min(o.TTL, l.horizon))}
	lease := locker.NewLease(l.closing.Context(), h, g, o)
	context.AfterFunc(lctx, func() {
		if cause := context.Cause(l.closing.Context()); cause != nil {
			lease.Lose(cause) // Close ended the lock
			return
		}
		lease.Lose(fmt.Errorf("rueidislock ended the lock on %q (a majority of its keys lost): "+
			"%w", key, &locker.NodeError{Node: l.addr, Err: context.Cause(lctx)}))
	})
	return lease, nil
}

// failed turns rueidislock's refusal into what Acquire returns.
func (l *Locker) failed(ctx context.Context, key string, err error) error {
	switch {
	case l.closing.Err() != nil || errors.Is(err, rl.ErrLockerClosed):
		return fmt.Errorf("acquire %q: %w (rueidislock: %w)", key, locker.ErrClosed, err)
	case ctx.Err() != nil:
		if !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return fmt.Errorf("acquire %q: %w", key, err)
	case errors.Is(err, rl.ErrNotLocked):
		return fmt.Errorf("%w: %q: %w", locker.ErrNotAcquired, key, err)
	}
	return fmt.Errorf("%w: %q: %w", locker.ErrNotAcquired, key, &locker.NodeError{Node: l.addr, Err: err})
}

// hold is the rueidislock side of a lease: the lock's context and the
// function that releases it.
type hold struct {
	l       *Locker
	key     string
	ctx     context.Context
	once    sync.Once
	release func()
}

var (
	_ locker.Holder = (*hold)(nil)
	_ locker.Ender  = (*hold)(nil)
)

// Extend implements locker.Holder: while rueidislock holds the lock, its
// own extensions keep the keys ahead of the horizon, so the deadline
// moves without a request.
func (h *hold) Extend(_ context.Context, ttl time.Duration) (time.Time, error) {
	if err := h.lost(); err != nil {
		return time.Time{}, err
	}
	return time.Now().Add(min(ttl, h.l.horizon)), nil
}

// Release implements locker.Holder: rueidislock's cancel, which deletes
// the keys still ours and waits for its goroutines. It reports the lock
// lost if rueidislock had ended it before.
func (h *hold) Release(context.Context) error {
	err := h.lost()
	h.end()
	return err
}

// Ended implements locker.Ender: an expired, lost or closed lease
// releases its lock.
func (h *hold) Ended(error) { h.end() }

func (h *hold) end() {
	h.once.Do(func() {
		h.release()
		h.l.closing.Done()
	})
}

// lost returns an error wrapping locker.ErrNotHeld once rueidislock has
// ended the lock on its own.
func (h *hold) lost() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("%w: %q: rueidislock lost a majority of its keys", locker.ErrNotHeld, h.key)
}
