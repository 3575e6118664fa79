package workloads

import (
	"context"
	"errors"
	"fmt"
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
	// began and ended wake the holder (one pending signal each) when an
	// extension begins and when one returns.
	began, ended chan struct{}
}

func newExtensions() *extensions {
	return &extensions{began: make(chan struct{}, 1), ended: make(chan struct{}, 1)}
}

// trace is the lease trace that feeds x.
func (x *extensions) trace() *locker.Trace {
	return &locker.Trace{Extending: func(locker.Extension) { signal(x.began) }, Extended: x.add}
}

func (x *extensions) add(e locker.Extension) {
	x.mu.Lock()
	x.got = append(x.got, e)
	x.mu.Unlock()
	signal(x.ended)
}

// signal leaves a signal on ch unless one is pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
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
// the lock answered the key was no longer the lease's, info otherwise —
// and info for one that failed after its holder began to release
// (released, zero before): the lease refuses an extension that returns
// while it is being released, whatever the lock answered.
func (e *engine) reportExtensions(c *client, x *extensions, key string, section int64, released time.Time) error {
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
		case !released.IsZero() && !ext.End.Before(released):
			r.Type, r.Error = history.Info, "returned after its holder began to release: "+ext.Err.Error()
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

// hold holds the section of lease for d, or until the load ends. With
// an auto-extending lease (x not nil) it stops when the lease ends — a
// holder of a long job watches its lease — and tells the judge as each
// extension begins (the moment a pause inside an extension is aimed at)
// and reports each as it returns: the holder's loop is idle meanwhile,
// and the watchdog's own calls wait for none of this.
func (e *engine) hold(c *client, lease locker.Lease, x *extensions, section int64, d time.Duration) error {
	if x == nil {
		c.sleep(e.load, d)
		return nil
	}
	if d <= 0 {
		return nil
	}
	c.timer.Reset(d)
	defer c.timer.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), judgeTimeout)
	defer cancel()
	for {
		select {
		case <-e.load.Done():
			return nil
		case <-lease.Done():
			return nil
		case <-c.timer.C:
			return nil
		case <-x.began:
			if err := c.Judge.Extending(ctx, section); err != nil {
				return fmt.Errorf("client %d: extending: %w", c.Process, err)
			}
		case <-x.ended:
			if err := e.reportExtensions(c, x, lease.Key(), section, time.Time{}); err != nil {
				return err
			}
		}
	}
}

// holdFor draws how long the holder of lease holds after its first
// access: Spec.HoldFor, a fraction, up to Spec.HoldLeft, of what the
// lease has left by its ValidUntil (nothing once that has passed), or
// Spec.Hold.
func (e *engine) holdFor(c *client, lease locker.Lease) time.Duration {
	if e.spec.HoldFor > 0 {
		return e.spec.HoldFor
	}
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
