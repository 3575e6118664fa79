// Package noop is the control backend: it grants every request at once and
// excludes nobody. Its only use is to prove that lockbench's checkers catch
// violations: under contention a correct checker must report overlaps for
// noop.
package noop

import (
	"context"
	"sync"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
)

func init() {
	// The control runs on no server, so no server fault applies to it
	// (its Servers say none): it faces the baseline and client pauses,
	// where it must show violations.
	backends.Register(backends.Descriptor{
		Name:    "noop",
		Doc:     "no mutual exclusion at all: the control that proves the checkers catch violations",
		Control: true,
		Open: func(cfg backends.Config) (locker.Locker, error) {
			if err := cfg.Check(); err != nil {
				return nil, err
			}
			return New(), nil
		},
	})
}

// Locker grants every Acquire immediately. It implements locker.Locker.
type Locker struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	once   sync.Once
}

// New returns a noop Locker.
func New() *Locker {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Locker{ctx: ctx, cancel: cancel}
}

// Acquire grants key at once.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.TryAcquire(ctx, key, opts...)
}

// TryAcquire grants key at once.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := context.Cause(l.ctx); err != nil {
		return nil, err
	}
	g := locker.Grant{Key: key, ValidUntil: time.Now().Add(o.TTL)}
	return locker.NewLease(l.ctx, holder{}, g, o), nil
}

// Info describes noop.
func (l *Locker) Info() locker.Info {
	return locker.Info{
		Name:      "noop",
		Quorum:    0,
		Guarantee: "none: every request is granted at once; the control that proves the checkers catch violations",
	}
}

// Close ends every outstanding lease.
func (l *Locker) Close() error {
	l.once.Do(func() { l.cancel(locker.ErrClosed) })
	return nil
}

// holder has nothing to extend or release.
type holder struct{}

func (holder) Extend(_ context.Context, ttl time.Duration) (time.Time, error) {
	return time.Now().Add(ttl), nil
}

func (holder) Release(context.Context) error { return nil }
