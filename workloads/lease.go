package workloads

import (
	"errors"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
)

// extensions collects what one lease's trace reports — the extensions its
// auto-extend watchdog made, in a goroutine of the lease's — for its
// holder to report to the judge from its own loop, whose calls to the
// judge are sequential.
type extensions struct {
	mu  sync.Mutex
	got []locker.Extension
}

func (x *extensions) add(e locker.Extension) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.got = append(x.got, e)
}

// take returns the extensions reported since the last call.
func (x *extensions) take() []locker.Extension {
	x.mu.Lock()
	defer x.mu.Unlock()
	got := x.got
	x.got = nil
	return got
}

// reportExtensions tells the judge of the extensions of section's lease
// that returned since the last call (none when x is nil): ok with the
// lease's new ValidUntil and the contract of the TTL asked, fail when
// the lock answered the key was no longer the lease's, info otherwise.
func (e *engine) reportExtensions(c *client, x *extensions, key string, section int64) error {
	if x == nil {
		return nil
	}
	for _, ext := range x.take() {
		r := judge.OpReport{F: history.Extend, Type: history.OK, Key: key, Section: section,
			Invoke: ext.Start.UnixNano(), Complete: ext.End.UnixNano(),
			Promise: int64(c.info.Promise(ext.TTL)), MaxValidity: int64(c.info.MaxValidity(ext.TTL))}
		switch {
		case ext.Err == nil:
			if !ext.ValidUntil.IsZero() {
				r.ValidUntil = ext.ValidUntil.UnixNano()
			}
		case errors.Is(ext.Err, locker.ErrNotHeld):
			r.Type, r.Error = history.Fail, ext.Err.Error()
		default:
			r.Type, r.Error = history.Info, ext.Err.Error()
		}
		if err := e.report(c, r); err != nil {
			return err
		}
	}
	return nil
}

// holdFor draws how long the holder of lease holds after its first
// access: a fraction, up to Spec.HoldLeft, of what the lease has left
// by its ValidUntil (nothing once that has passed), or Spec.Hold.
func (e *engine) holdFor(c *client, lease locker.Lease) time.Duration {
	if e.spec.HoldLeft > 0 {
		if v := lease.ValidUntil(); !v.IsZero() {
			left := time.Until(v)
			if left <= 0 {
				return 0
			}
			return time.Duration(c.r.Float64() * e.spec.HoldLeft * float64(left))
		}
	}
	return e.spec.Hold.Sample(c.r)
}
