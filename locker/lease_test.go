package locker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/locker"
)

// holder is an in-memory backend side of a lease, enough to drive the
// lifecycle that NewLease runs.
type holder struct {
	mu         sync.Mutex
	extendErr  error // returned by Extend when set
	releaseErr error // returned by Release when set
	extends    int
	released   int
	ended      []error
	endedCh    chan struct{} // closed by the first Ended call
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
	if len(h.ended) == 1 {
		close(h.endedCh)
	}
}

// waitEnded waits for the lease to call Ended: it does so after Done
// closes, so that a user is told of the end before any cleanup runs.
func (h *holder) waitEnded(t *testing.T) {
	t.Helper()
	select {
	case <-h.endedCh:
	case <-time.After(5 * time.Second):
		t.Fatal("Ended not called within 5s of the lease's end")
	}
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
	h := &holder{endedCh: make(chan struct{})}
	l := locker.NewLease(context.Background(), h, locker.Grant{Key: "k", Token: 7, HasToken: true, ValidUntil: time.Now().Add(ttl)}, o)
	return l, h
}

func waitDone(t *testing.T, l locker.Lease, within time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(within):
		t.Fatalf("lease still held after %v (valid until %v)", within, l.ValidUntil())
	}
}

// TestUnconfirmedReleaseSaysSo: a release the backend could not confirm
// (its context ended, the nodes were unreachable) ends the lease, but its
// Err does not claim a clean release: it wraps the backend's error too.
func TestUnconfirmedReleaseSaysSo(t *testing.T) {
	h := &holder{endedCh: make(chan struct{}), releaseErr: fmt.Errorf("%w: the release reached 1 of 5 nodes", locker.ErrUnavailable)}
	l := locker.NewLease(context.Background(), h, locker.Grant{Key: "k", ValidUntil: time.Now().Add(time.Minute)}, locker.Options{TTL: time.Minute})
	if err := l.Release(context.Background()); !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Release = %v, want the backend's error", err)
	}
	<-l.Done()
	if err := l.Err(); !errors.Is(err, locker.ErrReleased) || !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Err after an unconfirmed Release = %v, want ErrReleased wrapping the backend's error", err)
	}
	t.Log(l.Err())
}

func TestLeaseRelease(t *testing.T) {
	defer goleak.VerifyNone(t)
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
	waitDone(t, l, time.Second)
	if !errors.Is(l.Err(), locker.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", l.Err())
	}
	if err := l.Release(context.Background()); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	if err := l.Extend(context.Background(), time.Second); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Extend after Release = %v, want ErrNotHeld", err)
	}
	if _, released, ended := h.counts(); released != 1 || ended != 0 {
		t.Fatalf("backend saw %d releases and %d Ended calls, want 1 and 0", released, ended)
	}
}

func TestLeaseExpires(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, h := newLease(t, 50*time.Millisecond)
	waitDone(t, l, 5*time.Second)
	if !errors.Is(l.Err(), locker.ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired", l.Err())
	}
	if time.Now().Before(l.ValidUntil()) {
		t.Fatalf("lease ended before its ValidUntil %v", l.ValidUntil())
	}
	if err := l.Release(context.Background()); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Release of an expired lease = %v, want ErrNotHeld", err)
	}
	h.waitEnded(t)
	if _, released, ended := h.counts(); released != 0 || ended != 1 {
		t.Fatalf("backend saw %d releases and %d Ended calls, want 0 and 1", released, ended)
	}
}

func TestLeaseExtendMovesDeadline(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, _ := newLease(t, 50*time.Millisecond)
	first := l.ValidUntil()
	if err := l.Extend(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if !l.ValidUntil().After(first.Add(50 * time.Second)) {
		t.Fatalf("ValidUntil %v not moved a minute past %v", l.ValidUntil(), first)
	}
	select {
	case <-l.Done():
		t.Fatalf("extended lease ended at its first deadline: %v", l.Err())
	case <-time.After(300 * time.Millisecond):
	}
	if err := l.Extend(context.Background(), 0); !errors.Is(err, locker.ErrInvalid) {
		t.Fatalf("Extend(0) = %v, want ErrInvalid", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseExtendNotHeldLoses(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, h := newLease(t, time.Minute)
	h.failExtends(fmt.Errorf("%w: value changed", locker.ErrNotHeld))
	if err := l.Extend(context.Background(), time.Minute); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Extend = %v, want ErrNotHeld", err)
	}
	waitDone(t, l, time.Second)
	if !errors.Is(l.Err(), locker.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", l.Err())
	}
}

func TestLeaseExtendTransientKeepsLease(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, h := newLease(t, time.Minute)
	h.failExtends(errors.New("i/o timeout"))
	if err := l.Extend(context.Background(), time.Minute); err == nil {
		t.Fatal("Extend succeeded with a failing backend")
	}
	if l.Err() != nil {
		t.Fatalf("a transient extend failure ended the lease: %v", l.Err())
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseLose(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, h := newLease(t, time.Minute)
	cause := errors.New("session expired")
	l.Lose(cause)
	waitDone(t, l, time.Second)
	if !errors.Is(l.Err(), locker.ErrLost) || !errors.Is(l.Err(), cause) {
		t.Fatalf("Err = %v, want ErrLost wrapping the cause", l.Err())
	}
	l.Lose(errors.New("again")) // no effect
	if !errors.Is(l.Err(), cause) {
		t.Fatalf("a second Lose replaced the first cause: %v", l.Err())
	}
	h.waitEnded(t)
	if _, _, ended := h.counts(); ended != 1 {
		t.Fatalf("Ended called %d times, want 1", ended)
	}
}

func TestLeaseParentEnds(t *testing.T) {
	defer goleak.VerifyNone(t)
	parent, cancel := context.WithCancelCause(context.Background())
	o, _ := locker.Resolve("k", locker.WithAutoExtend(true), locker.WithTTL(time.Minute))
	l := locker.NewLease(parent, &holder{endedCh: make(chan struct{})}, locker.Grant{Key: "k", ValidUntil: time.Now().Add(time.Minute)}, o)
	cancel(locker.ErrClosed)
	waitDone(t, l, time.Second)
	if !errors.Is(l.Err(), locker.ErrLost) || !errors.Is(l.Err(), locker.ErrClosed) {
		t.Fatalf("Err = %v, want ErrLost wrapping ErrClosed", l.Err())
	}
}

func TestLeaseAutoExtend(t *testing.T) {
	defer goleak.VerifyNone(t)
	ttl := 60 * time.Millisecond
	l, h := newLease(t, ttl, locker.WithAutoExtend(true))
	// Wait for several extensions: the lease must outlive its TTL many times.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if extends, _, _ := h.counts(); extends >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("watchdog did not extend 5 times in 10s")
		}
		select {
		case <-l.Done():
			t.Fatalf("auto-extended lease ended: %v", l.Err())
		case <-time.After(ttl / 3):
		}
	}
	boom := errors.New("node unreachable")
	h.failExtends(boom)
	waitDone(t, l, 5*time.Second)
	if !errors.Is(l.Err(), locker.ErrLost) || !errors.Is(l.Err(), boom) {
		t.Fatalf("Err = %v, want ErrLost wrapping the last extend error", l.Err())
	}
}

func TestLeaseMaxHoldBoundsAutoExtend(t *testing.T) {
	defer goleak.VerifyNone(t)
	ttl := 30 * time.Millisecond
	start := time.Now()
	l, h := newLease(t, ttl, locker.WithAutoExtend(true), locker.WithMaxHold(150*time.Millisecond))
	waitDone(t, l, 10*time.Second)
	if !errors.Is(l.Err(), locker.ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired once MaxHold stops the watchdog", l.Err())
	}
	if extends, _, _ := h.counts(); extends == 0 {
		t.Fatal("watchdog never extended before MaxHold")
	}
	if held := time.Since(start); held > 150*time.Millisecond+ttl+2*time.Second {
		t.Fatalf("lease held %v, far past MaxHold", held)
	}
}

func TestLeaseConcurrentUse(t *testing.T) {
	defer goleak.VerifyNone(t)
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
	defer goleak.VerifyNone(t)
	ttl := 90 * time.Millisecond
	o, err := locker.Resolve("k", locker.WithTTL(ttl), locker.WithAutoExtend(true))
	if err != nil {
		t.Fatal(err)
	}
	h := &gateHolder{extending: make(chan struct{}, 1), gate: make(chan struct{}), releases: make(chan error, 4)}
	l := locker.NewLease(context.Background(), h, locker.Grant{Key: "k", ValidUntil: time.Now().Add(ttl)}, o)
	select {
	case <-h.extending:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not extend within 5s")
	}
	l.Lose(errors.New("session expired"))
	waitDone(t, l, time.Second)
	close(h.gate)
	select {
	case err := <-h.releases:
		if err != nil {
			t.Fatalf("the key was given back on an ended context (%v): the release never leaves the client", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the key the backend extended after the lease ended was not given back")
	}
}
