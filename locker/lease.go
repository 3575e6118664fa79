package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Holder is a backend's side of one lease: the two operations NewLease
// cannot do by itself.
type Holder interface {
	// Extend keeps the key for ttl from now and returns the new ValidUntil.
	// It returns an error wrapping ErrNotHeld when the backend no longer
	// holds the key for this lease; any other error is taken as transient.
	Extend(ctx context.Context, ttl time.Duration) (time.Time, error)
	// Release gives the key up. It returns an error wrapping ErrNotHeld
	// when the backend no longer held the key for this lease.
	Release(ctx context.Context) error
}

// Ender is implemented by a Holder that must clean up when its lease ends
// other than by Release: expiry, loss, or its Locker being closed (for
// example a ZooKeeper lease deletes its znode once it has expired locally).
// Ended is called once, synchronously, by the goroutine that ended the
// lease, with no lock of the lease held.
type Ender interface {
	Ended(err error)
}

// Grant is what a backend knows about a fresh grant.
type Grant struct {
	// Key is the key granted.
	Key string
	// Token is the fencing token, meaningful when HasToken is set.
	Token uint64
	// HasToken reports whether the backend issued a fencing token.
	HasToken bool
	// ValidUntil is the local validity deadline of the grant.
	ValidUntil time.Time
}

// Handle is the Lease implementation backends share. NewLease returns it;
// a backend that learns of a loss on its own (a ZooKeeper session expiry,
// an etcd lease that stopped being kept alive) calls Lose.
type Handle struct {
	holder   Holder
	grant    Grant
	opts     Options
	acquired time.Time
	done     chan struct{}
	// life is cancelled when the lease ends, so that an auto-extension in
	// flight stops with it.
	life   context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	err        error     // why the lease ended; nil while held
	validUntil time.Time // moved by Extend
	releasing  bool      // Release has begun: no more extensions
	extendErr  error     // the last failed auto-extension, the cause of a loss
	maxHeld    bool      // the watchdog stopped at MaxHold: expiry is not a loss
	expiry     *time.Timer
	stopParent func() bool
}

var _ Lease = (*Handle)(nil)

// NewLease starts the lifecycle of a granted lease: an expiry timer at
// g.ValidUntil (the lease then ends with ErrExpired), the auto-extend
// watchdog when o.AutoExtend is set, and a loss when parent ends (the lease
// then ends with ErrLost wrapping context.Cause(parent)); a Locker passes a
// context it cancels with ErrClosed in Close.
func NewLease(parent context.Context, h Holder, g Grant, o Options) *Handle {
	l := &Handle{
		holder:     h,
		grant:      g,
		opts:       o,
		acquired:   time.Now(),
		done:       make(chan struct{}),
		validUntil: g.ValidUntil,
	}
	l.life, l.cancel = context.WithCancel(context.Background())
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expiry = time.AfterFunc(time.Until(g.ValidUntil), l.onExpiry)
	l.stopParent = context.AfterFunc(parent, func() {
		l.Lose(fmt.Errorf("%w", context.Cause(parent)))
	})
	if o.AutoExtend {
		go l.watchdog()
	}
	return l
}

// Key implements Lease.
func (l *Handle) Key() string { return l.grant.Key }

// Token implements Lease.
func (l *Handle) Token() (uint64, bool) { return l.grant.Token, l.grant.HasToken }

// ValidUntil implements Lease.
func (l *Handle) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Done implements Lease.
func (l *Handle) Done() <-chan struct{} { return l.done }

// Err implements Lease.
func (l *Handle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Extend implements Lease.
func (l *Handle) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		return Invalidf("extend TTL %v for key %q: must be positive", ttl, l.grant.Key)
	}
	return l.extend(ctx, ttl, false)
}

// extend extends the lease by ttl; auto says the watchdog asked. A Trace
// hears of every call that reached the backend.
func (l *Handle) extend(ctx context.Context, ttl time.Duration, auto bool) error {
	if err := l.held(); err != nil {
		return err
	}
	t := l.opts.Trace
	x := Extension{Key: l.grant.Key, TTL: ttl, Auto: auto, Start: time.Now()}
	if t != nil && t.Extending != nil {
		t.Extending(x)
	}
	until, err := l.holder.Extend(ctx, ttl)
	x.End = time.Now()
	err = l.extended(ctx, until, err)
	if t != nil && t.Extended != nil {
		x.Err = err
		if err == nil {
			x.ValidUntil = until
		}
		t.Extended(x)
	}
	return err
}

// extended takes in what the backend answered to an extension.
func (l *Handle) extended(ctx context.Context, until time.Time, err error) error {
	l.mu.Lock()
	if l.err != nil || l.releasing {
		ended, releasing := l.err, l.releasing
		l.mu.Unlock()
		if err == nil && !releasing {
			// The lease ended locally while the backend extended it: give
			// the key back rather than keep it for nobody. (A Release in
			// progress gives it back itself.) ctx may have ended with the
			// lease (the watchdog's does): give back on a context of its
			// own, bounded by the TTL, after which the key expires anyway.
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.TTL)
			_ = l.holder.Release(gctx)
			cancel()
		}
		return notHeld(l.grant.Key, ended)
	}
	if err != nil {
		l.extendErr = err
		l.mu.Unlock()
		if errors.Is(err, ErrNotHeld) {
			l.end(fmt.Errorf("%w: %w", ErrLost, err))
		}
		return fmt.Errorf("extend %q: %w", l.grant.Key, err)
	}
	l.extendErr = nil
	l.validUntil = until
	l.expiry.Reset(time.Until(until))
	l.mu.Unlock()
	return nil
}

// Release implements Lease.
func (l *Handle) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.err != nil || l.releasing {
		err := l.err
		l.mu.Unlock()
		return notHeld(l.grant.Key, err)
	}
	l.releasing = true
	l.mu.Unlock()

	err := l.holder.Release(ctx)
	switch {
	case err == nil:
		l.end(ErrReleased)
	case errors.Is(err, ErrNotHeld):
		l.end(fmt.Errorf("%w: %w", ErrLost, err))
	default:
		// Released here (no more extensions), but the backend did not
		// confirm it: say so rather than claim a clean release.
		l.end(fmt.Errorf("%w here, but the backend did not confirm it: %w", ErrReleased, err))
	}
	if err != nil {
		return fmt.Errorf("release %q: %w", l.grant.Key, err)
	}
	return nil
}

// Lose ends the lease with an error wrapping ErrLost and cause. It does
// nothing if the lease has already ended, or while it is being released
// (the backend may see the key go because of that very release). Backends
// call it when they learn that the key is no longer theirs.
func (l *Handle) Lose(cause error) {
	l.mu.Lock()
	releasing := l.releasing
	l.mu.Unlock()
	if releasing {
		return
	}
	l.end(fmt.Errorf("%w: %w", ErrLost, cause))
}

// held returns nil while the lease can still be extended.
func (l *Handle) held() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.releasing {
		return notHeld(l.grant.Key, l.err)
	}
	return nil
}

func notHeld(key string, ended error) error {
	if ended == nil {
		return fmt.Errorf("%w: %q is being released", ErrNotHeld, key)
	}
	return fmt.Errorf("%w: %q: %w", ErrNotHeld, key, ended)
}

// onExpiry runs when the expiry timer fires. A timer that fired just before
// an Extend moved the deadline re-arms itself.
func (l *Handle) onExpiry() {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	if left := time.Until(l.validUntil); left > 0 {
		l.expiry.Reset(left)
		l.mu.Unlock()
		return
	}
	var err error = ErrExpired
	if l.opts.AutoExtend && !l.maxHeld {
		err = fmt.Errorf("%w: auto-extend did not succeed before %v: %w", ErrLost,
			l.validUntil.Format(time.RFC3339Nano), l.extendErrOrTimeout())
	}
	l.mu.Unlock()
	l.end(err)
}

func (l *Handle) extendErrOrTimeout() error {
	if l.extendErr != nil {
		return l.extendErr
	}
	return context.DeadlineExceeded
}

// end records why the lease ended, closes Done and stops the timers. Only
// the first call has an effect.
func (l *Handle) end(err error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	releasing := l.releasing
	l.expiry.Stop()
	stopParent := l.stopParent
	close(l.done)
	l.cancel()
	l.mu.Unlock()
	if stopParent != nil {
		stopParent()
	}
	if e, ok := l.holder.(Ender); ok && !releasing {
		e.Ended(err)
	}
}

// watchdog extends the lease every TTL/3 until it ends, retrying every
// TTL/10 after a failure while the lease is still valid, and stops
// extending once MaxHold has passed.
func (l *Handle) watchdog() {
	every, again := max(l.opts.TTL/3, time.Millisecond), max(l.opts.TTL/10, time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		if time.Since(l.acquired)+l.opts.TTL > l.opts.MaxHold {
			l.mu.Lock()
			l.maxHeld = true
			l.mu.Unlock()
			return
		}
		ctx, cancel := context.WithDeadline(l.life, l.ValidUntil())
		err := l.extend(ctx, l.opts.TTL, true)
		cancel()
		if err != nil {
			t.Reset(again)
		} else {
			t.Reset(every)
		}
	}
}
