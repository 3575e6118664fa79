//go:build go1.25

// synctest needs the timers of Go 1.23 on, which a module at go 1.22
// does not get by default.
//go:debug asynctimerchan=0

package locker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// The lease tests run in a synctest bubble: time is the bubble's fake
// clock, which moves only when every goroutine of the test waits, so a
// 50 ms TTL ends at exactly 50 ms however busy the machine is, and
// synctest.Test fails a test that leaves a goroutine behind.

// holder is an in-memory backend side of a lease, enough to drive the
// lifecycle that NewLease runs.
type holder struct {
	mu         sync.Mutex
	extendErr  error // returned by Extend when set
	releaseErr error // returned by Release when set
	extends    int
	released   int
	ended      []error
}

func (h *holder) Extend(_ context.Context, ttl time.Duration) (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.extendErr != nil {
		return time.Time{}, h.extendErr
	}
	h.extends++
	return time.Now().Add(ttl), nil
}

func (h *holder) Release(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released++
	return h.releaseErr
}

func (h *holder) Ended(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = append(h.ended, err)
}

// endedCalls waits until every goroutine of the bubble is blocked (an
// Ended call runs after Done closes, on the goroutine that ended the
// lease) and returns how many times Ended was called.
func (h *holder) endedCalls() int {
	synctest.Wait()
	_, _, ended := h.counts()
	return ended
}

func (h *holder) failExtends(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.extendErr = err
}

func (h *holder) counts() (extends, released, ended int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.extends, h.released, len(h.ended)
}

func newLease(t *testing.T, ttl time.Duration, opts ...locker.Option) (*locker.Handle, *holder) {
	t.Helper()
	o, err := locker.Resolve("k", append([]locker.Option{locker.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{}
	l := locker.NewLease(context.Background(), h, locker.Grant{Key: "k", Token: 7, HasToken: true, ValidUntil: time.Now().Add(ttl)}, o)
	return l, h
}

// done reports whether l has ended, once every goroutine of the bubble
// is blocked: what has to happen by now has happened.
func done(l locker.Lease) bool {
	synctest.Wait()
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// TestUnconfirmedReleaseSaysSo: a release the backend could not confirm
// (its context ended, the nodes were unreachable) ends the lease, but its
// Err does not claim a clean release: it wraps the backend's error too.
func TestUnconfirmedReleaseSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &holder{releaseErr: fmt.Errorf("%w: the release reached 1 of 5 nodes", locker.ErrUnavailable)}
		l := locker.NewLease(context.Background(), h, locker.Grant{Key: "k", ValidUntil: time.Now().Add(time.Minute)}, locker.Options{TTL: time.Minute})
		if err := l.Release(context.Background()); !errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("Release = %v, want the backend's error", err)
		}
		if !done(l) {
			t.Fatal("an unconfirmed Release did not end the lease")
		}
		if err := l.Err(); !errors.Is(err, locker.ErrReleased) || !errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("Err after an unconfirmed Release = %v, want ErrReleased wrapping the backend's error", err)
		}
	})
}

func TestLeaseRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, h := newLease(t, time.Minute)
		if tok, ok := l.Token(); !ok || tok != 7 || l.Key() != "k" {
			t.Fatalf("Token, Key = %d %v %q", tok, ok, l.Key())
		}
		if l.Err() != nil {
			t.Fatalf("Err of a held lease = %v", l.Err())
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !done(l) || !errors.Is(l.Err(), locker.ErrReleased) {
			t.Fatalf("after Release: done %v, Err %v; want done with ErrReleased", done(l), l.Err())
		}
		if err := l.Release(context.Background()); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("second Release = %v, want ErrNotHeld", err)
		}
		if err := l.Extend(context.Background(), time.Second); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("Extend after Release = %v, want ErrNotHeld", err)
		}
		if _, released, _ := h.counts(); released != 1 || h.endedCalls() != 0 {
			t.Fatalf("backend saw %d releases and %d Ended calls, want 1 and 0", released, h.endedCalls())
		}
	})
}

// TestLeaseExpires: a lease nobody extends ends with ErrExpired at its
// ValidUntil, not a moment before or after.
func TestLeaseExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 50 * time.Millisecond
		l, h := newLease(t, ttl)
		time.Sleep(ttl - time.Nanosecond)
		if done(l) {
			t.Fatalf("lease ended %v before its ValidUntil: %v", time.Nanosecond, l.Err())
		}
		time.Sleep(time.Nanosecond)
		if !done(l) || !errors.Is(l.Err(), locker.ErrExpired) {
			t.Fatalf("at its ValidUntil: done %v, Err %v; want done with ErrExpired", done(l), l.Err())
		}
		if err := l.Release(context.Background()); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("Release of an expired lease = %v, want ErrNotHeld", err)
		}
		if _, released, _ := h.counts(); released != 0 || h.endedCalls() != 1 {
			t.Fatalf("backend saw %d releases and %d Ended calls, want 0 and 1", released, h.endedCalls())
		}
	})
}

// TestLeaseExtendMovesDeadline: an Extend moves the expiry to the new
// ValidUntil; the first deadline passes without effect.
func TestLeaseExtendMovesDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newLease(t, 50*time.Millisecond)
		first := l.ValidUntil()
		if err := l.Extend(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if want := time.Now().Add(time.Minute); !l.ValidUntil().Equal(want) {
			t.Fatalf("ValidUntil %v after Extend(1m), want %v (first %v)", l.ValidUntil(), want, first)
		}
		time.Sleep(time.Minute - time.Nanosecond)
		if done(l) {
			t.Fatalf("extended lease ended before its new deadline: %v", l.Err())
		}
		if err := l.Extend(context.Background(), 0); !errors.Is(err, locker.ErrInvalid) {
			t.Fatalf("Extend(0) = %v, want ErrInvalid", err)
		}
		time.Sleep(time.Nanosecond)
		if !done(l) || !errors.Is(l.Err(), locker.ErrExpired) {
			t.Fatalf("at the new deadline: done %v, Err %v; want done with ErrExpired", done(l), l.Err())
		}
	})
}

func TestLeaseExtendNotHeldLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, h := newLease(t, time.Minute)
		h.failExtends(fmt.Errorf("%w: value changed", locker.ErrNotHeld))
		if err := l.Extend(context.Background(), time.Minute); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("Extend = %v, want ErrNotHeld", err)
		}
		if !done(l) || !errors.Is(l.Err(), locker.ErrLost) {
			t.Fatalf("done %v, Err %v; want done with ErrLost", done(l), l.Err())
		}
	})
}

func TestLeaseExtendTransientKeepsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, h := newLease(t, time.Minute)
		h.failExtends(errors.New("i/o timeout"))
		if err := l.Extend(context.Background(), time.Minute); err == nil {
			t.Fatal("Extend succeeded with a failing backend")
		}
		if done(l) {
			t.Fatalf("a transient extend failure ended the lease: %v", l.Err())
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLeaseLose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, h := newLease(t, time.Minute)
		cause := errors.New("session expired")
		l.Lose(cause)
		if !done(l) || !errors.Is(l.Err(), locker.ErrLost) || !errors.Is(l.Err(), cause) {
			t.Fatalf("done %v, Err %v; want done with ErrLost wrapping the cause", done(l), l.Err())
		}
		l.Lose(errors.New("again")) // no effect
		if !errors.Is(l.Err(), cause) {
			t.Fatalf("a second Lose replaced the first cause: %v", l.Err())
		}
		if n := h.endedCalls(); n != 1 {
			t.Fatalf("Ended called %d times, want 1", n)
		}
	})
}

func TestLeaseParentEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		o, _ := locker.Resolve("k", locker.WithAutoExtend(true), locker.WithTTL(time.Minute))
		l := locker.NewLease(parent, &holder{}, locker.Grant{Key: "k", ValidUntil: time.Now().Add(time.Minute)}, o)
		cancel(locker.ErrClosed)
		if !done(l) || !errors.Is(l.Err(), locker.ErrLost) || !errors.Is(l.Err(), locker.ErrClosed) {
			t.Fatalf("done %v, Err %v; want done with ErrLost wrapping ErrClosed", done(l), l.Err())
		}
	})
}

// TestLeaseAutoExtend: the watchdog extends every TTL/3, so the lease
// outlives its TTL as long as the backend agrees; once every extension
// fails, the lease ends with ErrLost, wrapping the last error, when the
// validity of the last extension runs out.
func TestLeaseAutoExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 60 * time.Millisecond
		l, h := newLease(t, ttl, locker.WithAutoExtend(true))
		time.Sleep(10 * ttl)
		if done(l) {
			t.Fatalf("auto-extended lease ended within 10 TTLs: %v", l.Err())
		}
		if extends, _, _ := h.counts(); extends != 30 {
			t.Fatalf("%d extensions in 10 TTLs, want 30 (one every TTL/3)", extends)
		}
		// The last extension was at 10 TTLs: the lease is valid one TTL
		// from there.
		boom := errors.New("node unreachable")
		h.failExtends(boom)
		time.Sleep(ttl - time.Nanosecond)
		if done(l) {
			t.Fatalf("lease ended before the validity of its last extension ran out: %v", l.Err())
		}
		time.Sleep(time.Nanosecond)
		if !done(l) || !errors.Is(l.Err(), locker.ErrLost) || !errors.Is(l.Err(), boom) {
			t.Fatalf("done %v, Err %v; want done with ErrLost wrapping the last extend error", done(l), l.Err())
		}
	})
}

// TestLeaseMaxHoldBoundsAutoExtend: the watchdog stops extending once
// one more TTL would pass MaxHold, so the lease expires (ErrExpired, not a
// loss) within MaxHold of its grant, and no earlier than one TTL before.
func TestLeaseMaxHoldBoundsAutoExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl, maxHold = 30 * time.Millisecond, 150 * time.Millisecond
		start := time.Now()
		l, h := newLease(t, ttl, locker.WithAutoExtend(true), locker.WithMaxHold(maxHold))
		<-l.Done()
		held := time.Since(start)
		if !errors.Is(l.Err(), locker.ErrExpired) {
			t.Fatalf("Err = %v, want ErrExpired once MaxHold stops the watchdog", l.Err())
		}
		if extends, _, _ := h.counts(); extends == 0 {
			t.Fatal("watchdog never extended before MaxHold")
		}
		if held > maxHold || held <= maxHold-ttl {
			t.Fatalf("lease held %v, want within (%v, %v]", held, maxHold-ttl, maxHold)
		}
	})
}

func TestLeaseConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newLease(t, time.Minute, locker.WithAutoExtend(true))
		var wg sync.WaitGroup
		var okReleases sync.Map
		for i := range 8 {
			wg.Go(func() {
				_ = l.Extend(context.Background(), time.Minute)
				_ = l.ValidUntil()
				_ = l.Err()
				if l.Release(context.Background()) == nil {
					okReleases.Store(i, true)
				}
			})
		}
		wg.Wait()
		n := 0
		okReleases.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("%d concurrent Releases succeeded, want exactly 1", n)
		}
	})
}

// gateHolder's Extend waits at a gate (ignoring its context, as a request
// already on the wire does) and succeeds; Release reports the state of
// the context it was given.
type gateHolder struct {
	extending chan struct{} // receives when an Extend has begun
	gate      chan struct{} // closed to let Extends return
	releases  chan error    // the ctx.Err() of each Release
}

func (h *gateHolder) Extend(_ context.Context, ttl time.Duration) (time.Time, error) {
	select {
	case h.extending <- struct{}{}:
	default:
	}
	<-h.gate
	return time.Now().Add(ttl), nil
}

func (h *gateHolder) Release(ctx context.Context) error {
	h.releases <- ctx.Err()
	return nil
}

// TestLeaseGivesBackAKeyExtendedAfterItEnded: the watchdog's extension
// succeeds on the server after the lease ended locally (here: lost); the
// key is given back on a live context — the watchdog's own ended with
// the lease, and a release sent on it never reaches the server.
func TestLeaseGivesBackAKeyExtendedAfterItEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 90 * time.Millisecond
		o, err := locker.Resolve("k", locker.WithTTL(ttl), locker.WithAutoExtend(true))
		if err != nil {
			t.Fatal(err)
		}
		h := &gateHolder{extending: make(chan struct{}, 1), gate: make(chan struct{}), releases: make(chan error, 4)}
		l := locker.NewLease(context.Background(), h, locker.Grant{Key: "k", ValidUntil: time.Now().Add(ttl)}, o)
		<-h.extending // at TTL/3
		l.Lose(errors.New("session expired"))
		if !done(l) {
			t.Fatal("Lose did not end the lease")
		}
		close(h.gate)
		synctest.Wait()
		select {
		case err := <-h.releases:
			if err != nil {
				t.Fatalf("the key was given back on an ended context (%v): the release never leaves the client", err)
			}
		default:
			t.Fatal("the key the backend extended after the lease ended was not given back")
		}
	})
}

func TestLeaseTraceSeesExtensions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seen := make(chan locker.Extension, 100)
		var mu sync.Mutex
		started := map[time.Time]bool{}
		trace := &locker.Trace{
			Extending: func(x locker.Extension) {
				mu.Lock()
				defer mu.Unlock()
				started[x.Start] = x.End.IsZero() && x.Err == nil
			},
			Extended: func(x locker.Extension) {
				mu.Lock()
				ok := started[x.Start]
				mu.Unlock()
				if !ok {
					t.Errorf("extension %+v returned without its start reported first", x)
				}
				seen <- x
			},
		}
		ttl := 60 * time.Millisecond
		l, h := newLease(t, ttl, locker.WithAutoExtend(true), locker.WithTrace(trace))
		next := func() locker.Extension {
			t.Helper()
			select {
			case x := <-seen:
				return x
			case <-time.After(10 * time.Second):
				t.Fatal("no extension reported within 10s of the bubble's clock")
			}
			return locker.Extension{}
		}
		for range 2 {
			x := next()
			if !x.Auto || x.Key != "k" || x.TTL != ttl || x.Err != nil || x.End.Before(x.Start) || !x.ValidUntil.After(x.Start) {
				t.Fatalf("watchdog's extension reported as %+v", x)
			}
		}
		// The watchdog goes on beside a holder's own call; find the holder's.
		if err := l.Extend(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		for {
			x := next()
			if x.Auto {
				continue
			}
			if x.TTL != time.Minute || x.Err != nil {
				t.Fatalf("holder's extension reported as %+v", x)
			}
			break
		}
		// The watchdog's next call finds the key gone: reported, and the lease lost.
		h.failExtends(fmt.Errorf("%w: value changed", locker.ErrNotHeld))
		for {
			x := next()
			if x.Err == nil {
				continue // under way before the key went
			}
			if !errors.Is(x.Err, locker.ErrNotHeld) || !x.ValidUntil.IsZero() {
				t.Fatalf("failed extension reported as %+v", x)
			}
			break
		}
		if !done(l) {
			t.Fatal("the lease whose extension found the key gone did not end")
		}
		if !errors.Is(l.Err(), locker.ErrLost) {
			t.Fatalf("Err = %v, want ErrLost", l.Err())
		}
	})
}
