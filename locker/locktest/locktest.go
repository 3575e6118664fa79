// Package locktest is the conformance suite every lockbench backend runs
// against real servers with one call:
//
//	func TestConformance(t *testing.T) {
//		locktest.Run(t, func(t testing.TB) locker.Locker { ... })
//	}
//
// It checks mutual exclusion under contention, TryAcquire, expiry at the
// TTL, stale releases, Extend and auto-extension, cancellation, the
// Done/Err lifecycle, fencing tokens, bad input and goroutine leaks. The
// checks that count violations are exported (Exclusion), so a test can
// prove they fail against a backend that does not exclude (backends/noop).
package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Opener returns a new Locker on the backend under test. Every call must
// return an independent client, with its own connections, as separate
// processes would have. The suite closes it, and its Close must release
// everything the Opener made (its clients too): the suite checks that no
// goroutine is left behind.
type Opener func(t testing.TB) locker.Locker

// Option tunes the suite for a backend.
type Option func(*suite)

// WithTTL sets the TTL of the suite's short-lived leases (default 500 ms,
// raised to the backend's TTLResolution).
func WithTTL(ttl time.Duration) Option { return func(s *suite) { s.ttl = ttl } }

// WithSteal gives the suite a way to take a key away from its holder on the
// server side (delete the Redis key, the znode, the etcd key), so that it
// can check that the lease then ends with ErrLost.
func WithSteal(steal func(t testing.TB, key string)) Option {
	return func(s *suite) { s.steal = steal }
}

// WithContention sets the size of the mutual-exclusion test: workers
// goroutines taking the key sections times each (default 16 × 20).
func WithContention(workers, sections int) Option {
	return func(s *suite) { s.workers, s.sections = workers, sections }
}

type suite struct {
	open              Opener
	ttl               time.Duration
	steal             func(t testing.TB, key string)
	workers, sections int
	keys              atomic.Int64
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, open Opener, opts ...Option) {
	s := &suite{open: open, ttl: 500 * time.Millisecond, workers: 16, sections: 20}
	for _, o := range opts {
		o(s)
	}
	probe := open(t)
	info := probe.Info()
	if err := probe.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if info.TTLResolution > 0 && s.ttl%info.TTLResolution != 0 {
		s.ttl = (s.ttl/info.TTLResolution + 1) * info.TTLResolution
	}
	t.Run("Info", func(t *testing.T) { s.testInfo(t, info) })
	t.Run("BadInput", s.testBadInput)
	t.Run("MutualExclusion", func(t *testing.T) { s.testMutualExclusion(t, info) })
	t.Run("TryAcquireWhileHeld", s.testTryAcquire)
	t.Run("ExpiresAtTTL", s.testExpiry)
	t.Run("StaleRelease", s.testStaleRelease)
	t.Run("Extend", s.testExtend)
	t.Run("AutoExtend", s.testAutoExtend)
	t.Run("AcquireCancel", s.testCancel)
	t.Run("DoneOnRelease", s.testDoneOnRelease)
	t.Run("DoneOnLoss", s.testDoneOnLoss)
	t.Run("Tokens", func(t *testing.T) { s.testTokens(t, info) })
	t.Run("NoGoroutineLeak", s.testLeak)
}

// key returns a key no other subtest uses, so that a lease left behind by
// one test cannot disturb another.
func (s *suite) key(t *testing.T) string {
	return fmt.Sprintf("locktest:%s:%d:%d", strings.ReplaceAll(t.Name(), "/", ":"), time.Now().UnixNano(), s.keys.Add(1))
}

func (s *suite) locker(t *testing.T) locker.Locker {
	t.Helper()
	l := s.open(t)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// MustAcquire acquires key on l within 30 seconds, failing t otherwise.
// The lease must outlive the context it was acquired with, which ends
// when MustAcquire returns.
func MustAcquire(t testing.TB, l locker.Locker, key string, opts ...locker.Option) locker.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return lease
}

func release(t *testing.T, lease locker.Lease) {
	t.Helper()
	if err := lease.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release(%q): %v", lease.Key(), err)
	}
}

// WaitDone waits for lease to end and returns its Err, failing t if it
// has not ended within the given time.
func WaitDone(t testing.TB, lease locker.Lease, within time.Duration) error {
	t.Helper()
	select {
	case <-lease.Done():
		return lease.Err()
	case <-time.After(within):
		t.Fatalf("lease on %q still held after %v (valid until %v)", lease.Key(), within, lease.ValidUntil().Format(time.StampMilli))
		return nil
	}
}

// mustBeHeld checks that nobody else can take key right now: TryAcquire
// answers ErrNotAcquired. An answer that a node was unavailable (a busy
// machine's ensemble re-electing, a connection being made) says nothing
// either way, and is asked again, for up to 10 s.
func mustBeHeld(t *testing.T, l locker.Locker, key string, why string) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	for {
		other, err := l.TryAcquire(ctx, key, locker.WithTTL(time.Minute))
		if errors.Is(err, locker.ErrNotAcquired) {
			return
		}
		if other != nil {
			_ = other.Release(context.Background())
		}
		if !errors.Is(err, locker.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("%s: TryAcquire(%q) = %v, want ErrNotAcquired", why, key, err)
		}
		select { // the node is not back yet: ask again
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *suite) testInfo(t *testing.T, info locker.Info) {
	if info.Name == "" || info.Guarantee == "" {
		t.Fatalf("Info %+v: Name and Guarantee must say what the backend is", info)
	}
	// The contract a checker holds the backend to: a grant promises the
	// key for some time, and no longer than its lock can give.
	if p, most := info.Promise(s.ttl), info.MaxValidity(s.ttl); p <= 0 || p > most {
		t.Fatalf("Info %+v: for a TTL of %v it promises %v and gives at most %v: want 0 < promise ≤ most", info, s.ttl, p, most)
	}
}

func (s *suite) testBadInput(t *testing.T) {
	l := s.locker(t)
	ctx := ctxFor(t, 10*time.Second)
	cases := []struct {
		name string
		key  string
		opts []locker.Option
		want string // the message must name the bad value
	}{
		{"empty key", "", nil, "empty key"},
		{"zero TTL", s.key(t), []locker.Option{locker.WithTTL(0)}, "TTL 0s"},
		{"negative TTL", s.key(t), []locker.Option{locker.WithTTL(-time.Second)}, "TTL -1s"},
	}
	for _, c := range cases {
		for name, call := range map[string]func(context.Context, string, ...locker.Option) (locker.Lease, error){
			"Acquire": l.Acquire, "TryAcquire": l.TryAcquire,
		} {
			lease, err := call(ctx, c.key, c.opts...)
			if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s with %s = %v, want ErrInvalid mentioning %q", name, c.name, err, c.want)
			}
			if lease != nil {
				t.Errorf("%s with %s returned a lease", name, c.name)
			}
		}
	}
	lease := MustAcquire(t, l, s.key(t), locker.WithTTL(time.Minute))
	if err := lease.Extend(ctx, 0); !errors.Is(err, locker.ErrInvalid) {
		t.Errorf("Extend(0) = %v, want ErrInvalid", err)
	}
	release(t, lease)
}

func (s *suite) testMutualExclusion(t *testing.T, info locker.Info) {
	lockers := make([]locker.Locker, 4)
	for i := range lockers {
		lockers[i] = s.locker(t)
	}
	r, err := Exclusion(ctxFor(t, 3*time.Minute), lockers, s.key(t), s.workers, s.sections)
	if err != nil {
		t.Fatalf("after %d sections: %v", r.Sections, err)
	}
	if r.Overlaps != 0 {
		t.Fatalf("%d of %d critical sections overlapped: mutual exclusion violated", r.Overlaps, r.Sections)
	}
	if info.Fencing && r.TokenRegressions != 0 {
		t.Fatalf("%d of %d grants had a token not above the previous grant's", r.TokenRegressions, r.Sections)
	}
	if r.Sections != s.workers*s.sections {
		t.Fatalf("%d sections completed, want %d", r.Sections, s.workers*s.sections)
	}
}

func (s *suite) testTryAcquire(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	key := s.key(t)
	lease, err := a.TryAcquire(ctxFor(t, 10*time.Second), key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("TryAcquire of a free key: %v", err)
	}
	mustBeHeld(t, b, key, "another client while held")
	mustBeHeld(t, a, key, "the same client while held (leases are not re-entrant)")
	release(t, lease)
	again, err := b.TryAcquire(ctxFor(t, 10*time.Second), key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
	release(t, again)
}

func (s *suite) testExpiry(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	key := s.key(t)
	lease := MustAcquire(t, a, key, locker.WithTTL(s.ttl))
	if until := time.Until(lease.ValidUntil()); until <= 0 || until > s.ttl+time.Second {
		t.Fatalf("ValidUntil is %v from now for a TTL of %v", until, s.ttl)
	}
	// B waits for the key; it must get it, and not before A's validity.
	next := MustAcquire(t, b, key, locker.WithTTL(time.Minute), locker.WithRetry(locker.LinearBackoff(10*time.Millisecond)))
	if now := time.Now(); now.Before(lease.ValidUntil()) {
		t.Fatalf("key granted again %v before the first lease's ValidUntil", lease.ValidUntil().Sub(now))
	}
	if err := WaitDone(t, lease, 5*time.Second); !errors.Is(err, locker.ErrExpired) {
		t.Fatalf("Err of an expired lease = %v, want ErrExpired", err)
	}
	release(t, next)
}

func (s *suite) testStaleRelease(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	key := s.key(t)
	stale := MustAcquire(t, a, key, locker.WithTTL(s.ttl))
	WaitDone(t, stale, s.ttl+10*time.Second)
	holder := MustAcquire(t, b, key, locker.WithTTL(time.Minute))
	if err := stale.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Release of a stale lease = %v, want ErrNotHeld", err)
	}
	mustBeHeld(t, a, key, "after a stale Release")
	if err := stale.Extend(ctxFor(t, 10*time.Second), time.Minute); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Extend of a stale lease = %v, want ErrNotHeld", err)
	}
	mustBeHeld(t, a, key, "after a stale Extend")
	release(t, holder)
}

func (s *suite) testExtend(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	key := s.key(t)
	lease := MustAcquire(t, a, key, locker.WithTTL(s.ttl))
	first := lease.ValidUntil()
	if err := lease.Extend(ctxFor(t, 10*time.Second), 4*s.ttl); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if !lease.ValidUntil().After(first) {
		t.Fatalf("Extend did not move ValidUntil past %v", first.Format(time.StampMilli))
	}
	// Wait past the first deadline (plus the server's own slack) and check
	// the key is still ours.
	select {
	case <-lease.Done():
		t.Fatalf("extended lease ended: %v", lease.Err())
	case <-time.After(time.Until(first) + s.ttl/2):
	}
	mustBeHeld(t, b, key, "past the first TTL after Extend")
	if lease.Err() != nil {
		t.Fatalf("extended lease: Err = %v", lease.Err())
	}
	release(t, lease)
}

// testAutoExtend holds an auto-extended lease for two TTLs of at least
// 2 s. Each extension must be answered within the lease's validity (and
// the backend's per-node timeouts scale from the TTL): on a busy machine
// a 500 ms TTL was lost with its backend alive.
func (s *suite) testAutoExtend(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	key := s.key(t)
	ttl := max(s.ttl, 2*time.Second)
	lease := MustAcquire(t, a, key, locker.WithTTL(ttl), locker.WithAutoExtend(true))
	select {
	case <-lease.Done():
		t.Fatalf("auto-extended lease ended: %v", lease.Err())
	case <-time.After(2 * ttl):
	}
	mustBeHeld(t, b, key, "two TTLs into an auto-extended lease")
	release(t, lease)
	if err := WaitDone(t, lease, time.Second); !errors.Is(err, locker.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", err)
	}
}

func (s *suite) testCancel(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	key := s.key(t)
	lease := MustAcquire(t, a, key, locker.WithTTL(time.Minute))
	defer release(t, lease)

	ctx, cancel := context.WithCancel(context.Background())
	var cancelled atomic.Int64
	timer := time.AfterFunc(50*time.Millisecond, func() {
		cancelled.Store(time.Now().UnixNano())
		cancel()
	})
	defer timer.Stop()
	_, err := b.Acquire(ctx, key, locker.WithTTL(time.Minute))
	returned := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire of a held key with a cancelled ctx = %v, want an error wrapping context.Canceled", err)
	}
	if late := returned.Sub(time.Unix(0, cancelled.Load())); late > 100*time.Millisecond {
		t.Fatalf("Acquire returned %v after its ctx was cancelled, want ≤ 100ms", late)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if _, err := b.Acquire(dctx, key); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v, want an error wrapping context.DeadlineExceeded", err)
	}
}

func (s *suite) testDoneOnRelease(t *testing.T) {
	l := s.locker(t)
	lease := MustAcquire(t, l, s.key(t), locker.WithTTL(time.Minute))
	select {
	case <-lease.Done():
		t.Fatal("Done closed while held")
	default:
	}
	if lease.Err() != nil {
		t.Fatalf("Err while held = %v", lease.Err())
	}
	release(t, lease)
	if err := WaitDone(t, lease, time.Second); !errors.Is(err, locker.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", err)
	}
	if err := lease.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
}

func (s *suite) testDoneOnLoss(t *testing.T) {
	t.Run("LockerClosed", func(t *testing.T) {
		l := s.open(t)
		lease := MustAcquire(t, l, s.key(t), locker.WithTTL(time.Minute), locker.WithAutoExtend(true))
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close = %v, want nil", err)
		}
		if err := WaitDone(t, lease, 5*time.Second); !errors.Is(err, locker.ErrLost) || !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("Err after the Locker closed = %v, want ErrLost wrapping ErrClosed", err)
		}
		if _, err := l.TryAcquire(ctxFor(t, 10*time.Second), s.key(t)); !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("TryAcquire on a closed Locker = %v, want ErrClosed", err)
		}
	})
	t.Run("Stolen", func(t *testing.T) {
		if s.steal == nil {
			t.Skip("the backend gave no way to take a key behind its holder's back (locktest.WithSteal)")
		}
		l := s.locker(t)
		key := s.key(t)
		lease := MustAcquire(t, l, key, locker.WithTTL(time.Minute))
		s.steal(t, key)
		if err := lease.Extend(ctxFor(t, 10*time.Second), time.Minute); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("Extend of a stolen lease = %v, want ErrNotHeld", err)
		}
		if err := WaitDone(t, lease, 5*time.Second); !errors.Is(err, locker.ErrLost) {
			t.Fatalf("Err of a stolen lease = %v, want ErrLost", err)
		}
	})
}

func (s *suite) testTokens(t *testing.T, info locker.Info) {
	a, b := s.locker(t), s.locker(t)
	key := s.key(t)
	var last uint64
	for i := range 20 {
		l := a
		if i%2 == 1 {
			l = b
		}
		lease := MustAcquire(t, l, key, locker.WithTTL(time.Minute))
		tok, ok := lease.Token()
		release(t, lease)
		if ok != info.Fencing {
			t.Fatalf("Token() ok = %v but Info().Fencing = %v", ok, info.Fencing)
		}
		if !ok {
			continue
		}
		if i > 0 && tok <= last {
			t.Fatalf("grant %d: token %d not above the previous grant's %d", i, tok, last)
		}
		last = tok
	}
}

func (s *suite) testLeak(t *testing.T) {
	before := Running()
	l := s.open(t)
	other := s.open(t)
	key := s.key(t)
	held := MustAcquire(t, l, key, locker.WithTTL(s.ttl), locker.WithAutoExtend(true))
	// A waiter that gives up, a lease left held, an expired lease.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, _ = other.Acquire(ctx, key)
	cancel()
	expired := MustAcquire(t, other, s.key(t), locker.WithTTL(s.ttl))
	WaitDone(t, expired, s.ttl+10*time.Second)
	_ = held
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	before.Leaked(t)
}
