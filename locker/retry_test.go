//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbench/lockbench/locker"
)

func TestExponentialBackoffBounds(t *testing.T) {
	s := locker.ExponentialBackoff(time.Millisecond, 64*time.Millisecond)
	for n := 1; n <= 100; n++ {
		ceil := min(time.Millisecond<<min(n-1, 20), 64*time.Millisecond)
		for range 50 {
			d, ok := s.Backoff(n)
			if !ok {
				t.Fatalf("retry %d: gave up", n)
			}
			if d < ceil/2 || d > ceil {
				t.Fatalf("retry %d: backoff %v outside [%v, %v]", n, d, ceil/2, ceil)
			}
		}
	}
}

func TestExponentialBackoffJitters(t *testing.T) {
	s := locker.ExponentialBackoff(10*time.Millisecond, time.Second)
	seen := map[time.Duration]bool{}
	for range 100 {
		d, _ := s.Backoff(5)
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("100 backoffs took only %d distinct values: no jitter", len(seen))
	}
}

func TestLimitRetry(t *testing.T) {
	s := locker.LimitRetry(locker.LinearBackoff(time.Millisecond), 3)
	for n := 1; n <= 3; n++ {
		if d, ok := s.Backoff(n); !ok || d != time.Millisecond {
			t.Fatalf("retry %d = %v, %v; want 1ms, true", n, d, ok)
		}
	}
	if _, ok := s.Backoff(4); ok {
		t.Fatal("retry 4 allowed by LimitRetry(..., 3)")
	}
	if _, ok := locker.NoRetry().Backoff(1); ok {
		t.Fatal("NoRetry allowed a retry")
	}
}

var errBusy = fmt.Errorf("%w: busy", locker.ErrNotAcquired)

// TestRetryStopsOnCtx: Retry makes no attempt, and waits no backoff,
// once ctx has ended. (In a synctest bubble: the hour-long backoff would
// pass at once on the bubble's clock if Retry waited it.)
func TestRetryStopsOnCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		attempts := 0
		start := time.Now()
		_, err := locker.Retry(ctx, locker.LinearBackoff(time.Hour), nil, func(context.Context) (locker.Lease, error) {
			attempts++
			cancel()
			return nil, errBusy
		})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, locker.ErrNotAcquired) {
			t.Fatalf("Retry error = %v, want it to wrap context.Canceled and ErrNotAcquired", err)
		}
		if attempts != 1 {
			t.Fatalf("Retry made %d attempts after ctx ended, want 1", attempts)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("Retry returned %v after ctx ended, want at once", waited)
		}
	})
}

// TestRetryCancelDuringBackoff: a ctx that ends during a backoff ends
// the wait then, not when the backoff would have.
func TestRetryCancelDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Minute, cancel)
		start := time.Now()
		_, err := locker.Retry(ctx, locker.LinearBackoff(time.Hour), nil, func(context.Context) (locker.Lease, error) {
			return nil, errBusy
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Retry error = %v, want context.Canceled", err)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Fatalf("Retry returned %v after it began, want when ctx was cancelled (1m), not after its hour-long backoff", waited)
		}
	})
}

func TestRetryWake(t *testing.T) {
	wake := make(chan struct{}, 1)
	attempts := 0
	_, err := locker.Retry(context.Background(), locker.LimitRetry(locker.LinearBackoff(time.Hour), 5), wake,
		func(context.Context) (locker.Lease, error) {
			attempts++
			if attempts == 3 {
				return nil, nil
			}
			wake <- struct{}{} // a release notification arrives before the next wait
			return nil, errBusy
		})
	if err != nil || attempts != 3 {
		t.Fatalf("Retry = %v after %d attempts; want success on the 3rd, woken twice", err, attempts)
	}
}

func TestRetryTerminalError(t *testing.T) {
	boom := errors.New("wrong password")
	attempts := 0
	_, err := locker.Retry(context.Background(), locker.LinearBackoff(time.Millisecond), nil, func(context.Context) (locker.Lease, error) {
		attempts++
		return nil, boom
	})
	if !errors.Is(err, boom) || attempts != 1 {
		t.Fatalf("Retry = %v after %d attempts; want the terminal error after 1", err, attempts)
	}
}

func TestRetryGivesUp(t *testing.T) {
	attempts := 0
	_, err := locker.Retry(context.Background(), locker.LimitRetry(locker.LinearBackoff(0), 2), nil, func(context.Context) (locker.Lease, error) {
		attempts++
		return nil, errBusy
	})
	if !errors.Is(err, locker.ErrNotAcquired) || attempts != 3 {
		t.Fatalf("Retry = %v after %d attempts; want ErrNotAcquired after 3", err, attempts)
	}
}
