//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// TestClosing: before Begin, work is counted and run; Begin refuses new
// work, ends the context with ErrClosed (and the leases under it with
// ErrLost wrapping ErrClosed), reports only the first call; Wait returns
// once the counted work is over, not before.
func TestClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c locker.Closing // the zero value is ready
		if err := c.Err(); err != nil || c.Context().Err() != nil {
			t.Fatalf("before Begin: Err %v, context %v; want both nil", err, c.Context().Err())
		}
		lease := locker.NewLease(c.Context(), &holder{}, locker.Grant{Key: "k", ValidUntil: time.Now().Add(time.Hour)},
			locker.Options{TTL: time.Hour, MaxHold: time.Hour})

		if err := c.Add(); err != nil {
			t.Fatalf("Add before Begin: %v", err)
		}
		time.AfterFunc(time.Second, c.Done) // an acquisition that takes a second
		var ran atomic.Bool
		if !c.Go(func() { time.Sleep(2 * time.Second); ran.Store(true) }) {
			t.Fatal("Go before Begin refused")
		}

		if !c.Begin() {
			t.Fatal("first Begin reported false")
		}
		if c.Begin() {
			t.Fatal("second Begin reported true")
		}
		if err := c.Err(); !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("Err after Begin = %v, want ErrClosed", err)
		}
		if cause := context.Cause(c.Context()); !errors.Is(cause, locker.ErrClosed) {
			t.Fatalf("context's cause after Begin = %v, want ErrClosed", cause)
		}
		if err := c.Add(); !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("Add after Begin = %v, want ErrClosed", err)
		}
		if c.Go(func() { t.Error("Go after Begin ran its function") }) {
			t.Fatal("Go after Begin accepted")
		}

		start := time.Now()
		c.Wait()
		if waited := time.Since(start); waited != 2*time.Second || !ran.Load() {
			t.Fatalf("Wait returned after %v (goroutine done: %v), want when the last work ended, 2s", waited, ran.Load())
		}
		synctest.Wait()
		if err := lease.Err(); !errors.Is(err, locker.ErrLost) || !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("lease under the Closing's context: Err %v, want ErrLost wrapping ErrClosed", err)
		}
	})
}

// TestClosingBind: a bound context ends with the caller's ctx, or with
// ErrClosed when Begin is called, whichever comes first.
func TestClosingBind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c locker.Closing
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		bound, stop := c.Bind(ctx)
		<-bound.Done()
		if err := context.Cause(bound); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("bound to a 1s ctx: cause %v, want DeadlineExceeded", err)
		}
		stop()

		bound, stop = c.Bind(context.Background())
		defer stop()
		c.Begin()
		<-bound.Done()
		if err := context.Cause(bound); !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("bound ctx after Begin: cause %v, want ErrClosed", err)
		}
	})
}

// TestClosingConcurrent: work counted from many goroutines while Close
// begins is either refused or waited for (the race detector and the
// WaitGroup's own checks watch the rest).
func TestClosingConcurrent(t *testing.T) {
	var c locker.Closing
	var counted, over atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for c.Add() == nil {
				counted.Add(1)
				over.Add(1)
				c.Done()
			}
		})
	}
	for counted.Load() < 100 {
		runtime.Gosched()
	}
	c.Begin()
	c.Wait()
	if n := counted.Load(); over.Load() != n {
		t.Fatalf("Wait returned with %d of %d counted pieces of work over", over.Load(), n)
	}
	wg.Wait()
}
