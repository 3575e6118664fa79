//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// stallingClock is a client's clock that can miss a stall: once armed,
// its second reading — in an uncontended TryAcquire of a Redlock that has
// granted before, the check, once the nodes have granted, that the grant
// is still valid — blocks until the test lets it go, as a virtual machine
// suspended at that moment would, and then returns the time the reading
// began when the clock does not count the suspension, or the time it
// returns when it does.
type stallingClock struct {
	counts  bool          // the clock counts the stall (a process pause)
	stalled chan struct{} // closed when the reading blocks
	resume  chan struct{} // closed by the test to end the stall

	mu       sync.Mutex
	armed    bool
	readings int           // since armed
	lost     time.Duration // what the clock did not count
}

func newStallingClock(counts bool) *stallingClock {
	return &stallingClock{counts: counts, stalled: make(chan struct{}), resume: make(chan struct{})}
}

func (c *stallingClock) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.readings = true, 0
}

func (c *stallingClock) now() time.Time {
	t := time.Now()
	c.mu.Lock()
	c.readings++
	stall, lost := c.armed && c.readings == 2, c.lost
	c.mu.Unlock()
	if !stall {
		return t.Add(-lost)
	}
	close(c.stalled)
	<-c.resume
	if c.counts {
		return time.Now().Add(-lost)
	}
	c.mu.Lock()
	c.lost += time.Since(t)
	c.mu.Unlock()
	return t.Add(-lost)
}

// TestWithClockOffset: a clock that is an hour behind, but counts every
// moment, changes nothing: leases are granted and extended, and their
// ValidUntil is in time.Now's terms.
func TestWithClockOffset(t *testing.T) {
	_, addrs := fresh(t, 3, redisOptions{})
	rl := newRedlock(t, addrs, redlock.WithClock(func() time.Time { return time.Now().Add(-time.Hour) }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const ttl = 2 * time.Second
	before := time.Now()
	lease, err := rl.TryAcquire(ctx, "k", locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if v := lease.ValidUntil(); !v.After(time.Now()) || v.After(before.Add(ttl)) {
		t.Errorf("ValidUntil %v from the call, want within (now, the call + %v]", v.Sub(before), ttl)
	}
	before = time.Now()
	if err := lease.Extend(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	if v := lease.ValidUntil(); !v.After(time.Now()) || v.After(before.Add(ttl)) {
		t.Errorf("extended: ValidUntil %v from the call, want within (now, the call + %v]", v.Sub(before), ttl)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWithClockStall: a client stalled inside TryAcquire, after its
// nodes granted, until the key has expired there and another client
// holds it. When the stalled client's clock counts the stall (a process
// pause), the grant's validity has run out and TryAcquire grants nothing;
// when it does not (a suspended virtual machine), the client is granted a
// key another holds: the assumption Redlock's safety rests on, which
// WithClock lets a test break.
func TestWithClockStall(t *testing.T) {
	_, addrs := fresh(t, 3, redisOptions{})
	const ttl = 300 * time.Millisecond
	other := newRedlock(t, addrs)
	for _, counts := range []bool{true, false} {
		name := map[bool]string{true: "counted", false: "missed"}[counts]
		t.Run(name, func(t *testing.T) {
			clock := newStallingClock(counts)
			rl := newRedlock(t, addrs, redlock.WithClock(clock.now))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			key := "stall-" + name
			// A first grant and release: the Redlock's connections are up
			// and its next try takes the lean path.
			warm, err := rl.TryAcquire(ctx, key+"-warm", locker.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}
			clock.arm()
			type result struct {
				lease locker.Lease
				err   error
			}
			got := make(chan result, 1)
			go func() {
				lease, err := rl.TryAcquire(ctx, key, locker.WithTTL(ttl))
				got <- result{lease, err}
			}()
			var stalledAt time.Time
			select {
			case <-clock.stalled:
				stalledAt = time.Now()
			case r := <-got:
				t.Fatalf("TryAcquire returned (%v) without reading the clock twice", r.err)
			}
			var held locker.Lease
			await(t, 10*time.Second, "the other client takes the expired key", func() bool {
				l, err := other.TryAcquire(ctx, key, locker.WithTTL(10*time.Second))
				held = l
				return err == nil
			})
			if d := time.Since(stalledAt); d < ttl*9/10 {
				t.Fatalf("the other client took the key %v after the stall began, before the stalled client's could expire (%v)", d, ttl)
			}
			close(clock.resume)
			r := <-got
			if counts {
				if !errors.Is(r.err, locker.ErrNotAcquired) {
					t.Errorf("a clock that counted the stall: TryAcquire = %v, want ErrNotAcquired: its validity ran out, "+
						"and the key is another's", r.err)
				}
			} else {
				if r.err != nil {
					t.Fatalf("a clock that missed the stall: TryAcquire = %v, want a lease (the double grant it allows)", r.err)
				}
				if r.lease.Err() != nil || held.Err() != nil {
					t.Errorf("want both leases held: %v, %v", r.lease.Err(), held.Err())
				}
				if !r.lease.ValidUntil().After(time.Now()) {
					t.Errorf("the stalled lease's ValidUntil %v is past: want it to claim what its clock says is left", r.lease.ValidUntil())
				}
				_ = r.lease.Release(ctx)
			}
			if err := held.Release(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}
