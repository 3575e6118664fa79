package locker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// MinBackoff is the shortest wait Retry makes between two attempts, so that
// no strategy can turn Acquire into a busy loop against the servers.
const MinBackoff = 500 * time.Microsecond

// RetryStrategy paces the attempts of Acquire. Strategies are stateless
// values, safe for concurrent use: Backoff is given the retry number.
type RetryStrategy interface {
	// Backoff returns how long to wait before retry n (n ≥ 1 is the retry
	// after the n-th failed attempt) and false to give up.
	Backoff(n int) (time.Duration, bool)
}

// RetryFunc adapts a function to RetryStrategy.
type RetryFunc func(n int) (time.Duration, bool)

// Backoff calls f.
func (f RetryFunc) Backoff(n int) (time.Duration, bool) { return f(n) }

// NoRetry makes Acquire give up after its first attempt, like TryAcquire.
func NoRetry() RetryStrategy {
	return RetryFunc(func(int) (time.Duration, bool) { return 0, false })
}

// LinearBackoff waits d before every retry.
func LinearBackoff(d time.Duration) RetryStrategy {
	return RetryFunc(func(int) (time.Duration, bool) { return d, true })
}

// ExponentialBackoff doubles the wait from min up to max, and draws each
// wait uniformly from its upper half ("equal jitter"), so that contending
// clients spread out instead of retrying in lockstep.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	if max < min {
		max = min
	}
	return RetryFunc(func(n int) (time.Duration, bool) {
		d := max
		if n < 62 && min<<(n-1) > 0 && min<<(n-1) < max {
			d = min << (n - 1)
		}
		half := d / 2
		if half <= 0 {
			return d, true
		}
		return half + rand.N(d-half+1), true
	})
}

// LimitRetry stops s after max retries.
func LimitRetry(s RetryStrategy, max int) RetryStrategy {
	return RetryFunc(func(n int) (time.Duration, bool) {
		if n > max {
			return 0, false
		}
		return s.Backoff(n)
	})
}

// DefaultRetry is the strategy Acquire uses when none is given: jittered
// exponential backoff from 1 ms to 250 ms, until ctx ends.
func DefaultRetry() RetryStrategy { return ExponentialBackoff(time.Millisecond, 250*time.Millisecond) }

// Retry is the acquire loop backends share. It calls attempt until it
// returns a lease, or an error that does not wrap ErrNotAcquired, or the
// strategy gives up, or ctx ends; in the last case the error wraps ctx.Err()
// and the last attempt's error. Between attempts it waits for the
// strategy's backoff (at least MinBackoff), or until wake delivers a value:
// a backend that learns of releases (a Redis hand-off list, a ZooKeeper or etcd
// watch) passes that channel so waiters try again at once. wake may be nil.
func Retry(ctx context.Context, s RetryStrategy, wake <-chan struct{}, attempt func(context.Context) (Lease, error)) (Lease, error) {
	if s == nil {
		s = DefaultRetry()
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for n := 1; ; n++ {
		l, err := attempt(ctx)
		if err == nil {
			return l, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxError(ctxErr, err)
		}
		if !errors.Is(err, ErrNotAcquired) {
			return nil, err
		}
		d, ok := s.Backoff(n)
		if !ok {
			return nil, err
		}
		d = max(d, MinBackoff)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			rearm(timer, d)
		}
		select {
		case <-ctx.Done():
			return nil, ctxError(ctx.Err(), err)
		case <-timer.C:
		case <-wake:
		}
	}
}

// ctxError reports that ctx ended, keeping the last attempt's error so the
// caller still sees which nodes refused.
func ctxError(ctxErr, last error) error {
	if errors.Is(last, ctxErr) {
		return last
	}
	return fmt.Errorf("%w (last attempt: %w)", ctxErr, last)
}

// rearm sets t to fire after d. It first drops a tick t sent that nobody
// read: under the timers of Go before 1.23 (asynctimerchan=1, which a
// main module at go 1.22 runs with) that tick stays in t.C, and Reset
// alone would let it through at once.
func rearm(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}
