package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
)

// errorPause is the least a closed-loop client waits after a failed
// acquire, so that a backend failing fast is not hammered in a busy loop.
const errorPause = time.Millisecond

// judgeTimeout bounds a call to the judge that is not a barrier: the
// judge answers at once unless it pauses the caller, and a pause is
// shorter.
const judgeTimeout = 5 * time.Minute

// Client is one client of a case: its own Locker (clients share no
// connections, as separate processes would not) and its line to the
// judge. Process is its number in the case.
type Client struct {
	Process int
	Locker  locker.Locker
	Judge   judge.Conn
	// Granted, when set, is called after each Acquire that returned a
	// lease and before its grant is reported to the judge: a worker
	// process stops itself there when a client pause is aimed at that
	// moment (history.PointGranted).
	Granted func()
}

// Run runs spec's load with clients (one goroutine each) until the
// case's duration has passed since the start barrier, Spec.MaxOps
// operations have started, the judge asks them to stop or ctx ends. It
// does not close the lockers or the judge lines.
//
// Each client waits at the judge's start barrier, then loops: it acquires
// a key (under Spec.AcquireTimeout), reports the grant to the judge
// (which opens the section and may pause the client's process), has the
// resource read the key's counter, holds (Spec.Hold, or the judge's
// longer hold), has it write the counter+1, has the end of the section
// acknowledged, and releases;
// acquires that did not grant and every release are reported too, with
// their times. At the end each client sends the judge its metrics
// (Measure's histograms and errors).
//
// The error is non-nil for a bad spec or arguments, when the judge could
// not be reached (the case is then broken), or when the backend refused
// the spec itself (an acquire failing with locker.ErrInvalid or
// locker.ErrClosed). When ctx ends, Run stops the load and returns
// ctx's error once every client has finished its section and reported.
func Run(ctx context.Context, spec Spec, clients []Client) error {
	s, err := spec.Normalize()
	if err != nil {
		return err
	}
	if len(clients) != s.Clients {
		return specErrorf("%d clients for a spec of %d: need one Client per client", len(clients), s.Clients)
	}
	for i, c := range clients {
		if c.Locker == nil || c.Judge == nil {
			return specErrorf("client %d of %d has no Locker or no judge line", i, len(clients))
		}
	}
	e := &engine{spec: s, keys: s.KeyNames()}
	e.opts = append([]locker.Option{locker.WithTTL(s.TTL)}, s.AcquireOptions...)
	if s.AutoExtend {
		e.opts = append(e.opts, locker.WithAutoExtend(true))
	}
	asked, err := locker.Resolve("k", e.opts...)
	if err != nil {
		return err
	}

	// Every client waits at the barrier; the load runs from the moment the
	// last one here is let through.
	starts := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			_, starts[i] = c.Judge.Ready(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(starts...); err != nil {
		return err
	}
	e.start = time.Now()
	// The load ends by cancellation (at the duration, or earlier), never
	// by a deadline, so that an acquire cut by the end of the load is
	// abandoned (not counted), not timed out.
	var cancel context.CancelFunc
	e.load, cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	e.stopLoad = cancel
	defer time.AfterFunc(s.Duration, cancel).Stop()
	defer context.AfterFunc(ctx, cancel)()
	if s.Rate > 0 {
		e.sched = newSchedule(e.start, s.Rate, s.MaxOps, rand.New(rand.NewPCG(s.Seed, 0x5eed)))
	}

	errs := make([]error, len(clients))
	for i, cl := range clients {
		c := &client{Client: cl, rec: NewRecorder(), r: rand.New(rand.NewPCG(s.Seed, uint64(cl.Process)+1)), timer: time.NewTimer(time.Hour)}
		c.timer.Stop()
		c.m = Measure(cl.Locker, c.rec)
		c.info = cl.Locker.Info()
		c.promise, c.maxValidity = c.info.Promise(asked.TTL), c.info.MaxValidity(asked.TTL)
		c.keys = newChooser(s, e.keys, c.r)
		wg.Go(func() { errs[i] = e.runClient(c) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("run stopped after %v: %w", time.Since(e.start).Round(time.Millisecond), context.Cause(ctx))
	}
	return nil
}

// engine is the state of one Run shared by its clients.
type engine struct {
	spec  Spec
	keys  []string
	opts  []locker.Option
	sched *schedule
	start time.Time

	load     context.Context // ends when the load stops
	stopLoad context.CancelFunc

	ops atomic.Int64 // operations started
}

// client is one client's private state.
type client struct {
	Client
	rec   *Recorder
	m     *Measured
	r     *rand.Rand
	keys  *chooser
	timer *time.Timer
	fatal error
	info  locker.Info
	// promise and maxValidity are the backend's contract for each grant
	// (Info.Promise and MaxValidity of the TTL asked), reported with it.
	promise, maxValidity time.Duration
}

// runClient runs one client's loop, then sends the judge its metrics.
func (e *engine) runClient(c *client) error {
	var err error
	if e.sched != nil {
		err = e.openLoop(c)
	} else {
		err = e.closedLoop(c)
	}
	m, merr := c.rec.Metrics().Encode()
	info := c.Locker.Info()
	m.Info = &info
	ctx, cancel := context.WithTimeout(context.Background(), judgeTimeout)
	defer cancel()
	return errors.Join(err, merr, c.Judge.Done(ctx, m))
}

// sleep waits d, or until ctx ends (then it returns false).
func (c *client) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	c.timer.Reset(d)
	select {
	case <-ctx.Done():
		c.timer.Stop()
		return false
	case <-c.timer.C:
		return true
	}
}

// claim takes one operation from the MaxOps budget.
func (e *engine) claim() bool {
	n := e.ops.Add(1)
	if e.spec.MaxOps > 0 && n > e.spec.MaxOps {
		e.ops.Add(-1)
		return false
	}
	return true
}

// running reports whether the client should start another operation.
func (e *engine) running(c *client) bool {
	if c.Judge.Stopping() {
		e.stopLoad()
	}
	return e.load.Err() == nil
}

// closedLoop: acquire, hold, release, think, until the load stops.
func (e *engine) closedLoop(c *client) error {
	for e.running(c) && e.claim() {
		think := e.spec.Think.Sample(c.r)
		granted, err := e.operate(c, time.Now())
		if err != nil {
			return err
		}
		if !granted {
			think = max(think, errorPause)
		}
		if !c.sleep(e.load, think) {
			break
		}
	}
	return c.fatal
}

// openLoop serves the arrivals of the shared Poisson schedule: each
// client takes the next arrival, waits for its time if it is still to
// come, and runs it, latency counted from the arrival's time.
func (e *engine) openLoop(c *client) error {
	deadline := e.start.Add(e.spec.Duration)
	for e.running(c) {
		at, ok := e.sched.next(deadline)
		if !ok {
			if !e.sched.spent() {
				// The arrivals ran up to the deadline: the load ends by
				// Duration, not by this client quitting early.
				<-e.load.Done()
			}
			break
		}
		if !c.sleep(e.load, time.Until(at)) || e.load.Err() != nil {
			break
		}
		e.ops.Add(1)
		if _, err := e.operate(c, at); err != nil {
			return err
		}
	}
	return c.fatal
}

// operate runs one operation whose latency counts from start, and reports
// whether the lock was granted. The error is the judge's: the case is
// broken.
func (e *engine) operate(c *client, start time.Time) (bool, error) {
	key, _ := c.keys.next()
	opts := e.opts
	var x *extensions
	if e.spec.AutoExtend {
		// The lease's watchdog extends it in a goroutine of its own: its
		// trace collects the extensions for the judge.
		x = newExtensions()
		opts = append(slices.Clip(e.opts), locker.WithTrace(x.trace()))
	}
	actx, cancel := context.WithTimeout(e.load, e.spec.AcquireTimeout)
	invoke := time.Now()
	lease, err := c.m.AcquireFrom(actx, start, key, opts...)
	complete := time.Now()
	timedOut := actx.Err() != nil
	cancel()
	if err != nil {
		if (errors.Is(err, locker.ErrInvalid) || errors.Is(err, locker.ErrClosed)) && e.load.Err() == nil {
			c.fatal = fmt.Errorf("client %d: acquire %q: %w", c.Process, key, err)
			e.stopLoad()
		}
		// Refused is a certain no; anything else (a timeout, a node
		// error, a run that ended mid-acquire) may have taken the key.
		typ := history.Info
		if errors.Is(err, locker.ErrNotAcquired) && !timedOut {
			typ = history.Fail
		}
		return false, e.report(c, judge.OpReport{F: history.Acquire, Type: typ, Key: key,
			Invoke: invoke.UnixNano(), Complete: complete.UnixNano(), Error: err.Error()})
	}
	if c.Granted != nil {
		c.Granted()
	}
	return true, e.section(c, lease, x, invoke, complete)
}

// report records an op on the judge.
func (e *engine) report(c *client, r judge.OpReport) error {
	ctx, cancel := context.WithTimeout(context.Background(), judgeTimeout)
	defer cancel()
	if err := c.Judge.Report(ctx, r); err != nil {
		return fmt.Errorf("client %d: report %s: %w", c.Process, r.F, err)
	}
	return nil
}

// section is one critical section on a granted lease: every step is
// acknowledged by the judge before the next, and the end before Release.
// The extensions of the lease (x, nil unless it auto-extends) are
// reported before the write, before the end and after the release.
func (e *engine) section(c *client, lease locker.Lease, x *extensions, invoke, complete time.Time) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), judgeTimeout)
	defer cancel()
	released := false
	defer func() {
		if !released { // the judge failed us: give the key back all the same
			rctx, cancel := context.WithTimeout(context.Background(), e.spec.AcquireTimeout)
			_ = lease.Release(rctx)
			cancel()
		}
	}()
	tok, hasTok := lease.Token()
	g := judge.GrantReport{Key: lease.Key(), Token: tok, HasToken: hasTok, Invoke: invoke.UnixNano(), Complete: complete.UnixNano(),
		Promise: int64(c.promise), MaxValidity: int64(c.maxValidity)}
	if v := lease.ValidUntil(); !v.IsZero() {
		g.ValidUntil = v.UnixNano()
	}
	grant, err := c.Judge.Grant(ctx, g)
	if err != nil {
		return fmt.Errorf("client %d: grant: %w", c.Process, err)
	}
	if err := c.Judge.Read(ctx, grant.Section); err != nil {
		return fmt.Errorf("client %d: read: %w", c.Process, err)
	}
	hold := grant.Hold
	switch {
	case hold <= 0:
		hold = e.holdFor(c, lease)
	case e.spec.HoldFor > hold:
		// A fault's hold asks for a section still open when it strikes,
		// never for a shorter one than the load's long hold.
		hold = e.spec.HoldFor
	}
	if err := e.hold(c, lease, x, grant.Section, hold); err != nil {
		return err
	}
	if err := e.reportExtensions(c, x, lease.Key(), grant.Section, time.Time{}); err != nil {
		return err
	}
	// A careful client checks its lease before it writes, and the history
	// keeps what the lease told it; this one writes all the same, so that
	// the resource's guard is what stops a stale write, and the report can
	// tell a holder that was warned from one that was not.
	told := false
	check := func() error {
		why := ended(lease)
		if told || why == "" {
			return nil
		}
		told = true
		now := time.Now().UnixNano()
		return e.report(c, judge.OpReport{F: history.LeaseEnd, Type: history.OK, Key: lease.Key(), Section: grant.Section,
			Invoke: now, Complete: now, Error: why})
	}
	if err := check(); err != nil {
		return err
	}
	if err := c.Judge.Write(ctx, grant.Section); err != nil {
		return fmt.Errorf("client %d: write: %w", c.Process, err)
	}
	if err := e.reportExtensions(c, x, lease.Key(), grant.Section, time.Time{}); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	if err := c.Judge.End(ctx, grant.Section); err != nil {
		return fmt.Errorf("client %d: end: %w", c.Process, err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), e.spec.AcquireTimeout)
	rinvoke := time.Now()
	rerr := lease.Release(rctx) // the decorator counts its failure
	rcomplete := time.Now()
	rcancel()
	released = true
	r := judge.OpReport{F: history.Release, Type: history.OK, Key: lease.Key(), Section: grant.Section,
		Invoke: rinvoke.UnixNano(), Complete: rcomplete.UnixNano()}
	switch {
	case rerr == nil:
	case errors.Is(rerr, locker.ErrNotHeld) || errors.Is(rerr, locker.ErrLost):
		r.Type, r.Error = history.Fail, rerr.Error()
	default:
		r.Type, r.Error = history.Info, rerr.Error()
	}
	if err := e.report(c, r); err != nil {
		return err
	}
	return e.reportExtensions(c, x, lease.Key(), grant.Section, rinvoke)
}

// ended says what a lease tells its holder once it has ended other than
// by Release: its Err (ErrExpired, ErrLost with the cause), or that its
// ValidUntil has passed though its timer has not fired yet (a process
// just resumed from a pause runs before its timers); "" while it holds.
func ended(l locker.Lease) string {
	if err := l.Err(); err != nil {
		return err.Error()
	}
	if v := l.ValidUntil(); !v.IsZero() && !time.Now().Before(v) {
		return fmt.Sprintf("its ValidUntil %s has passed", v.Format(time.StampMicro))
	}
	return ""
}

// schedule is the open loop's Poisson arrival process, shared by the
// clients: arrivals are drawn in time order with exponential gaps of mean
// 1/rate, independent of how fast they are served.
type schedule struct {
	mu    sync.Mutex
	r     *rand.Rand
	mean  float64 // seconds between arrivals
	at    time.Time
	taken int64
	max   int64 // 0: unbounded
}

func newSchedule(start time.Time, rate float64, maxOps int64, r *rand.Rand) *schedule {
	s := &schedule{r: r, mean: 1 / rate, at: start, max: maxOps}
	s.advance()
	return s
}

func (s *schedule) advance() {
	s.at = s.at.Add(time.Duration(s.r.ExpFloat64() * s.mean * float64(time.Second)))
}

// next takes the next arrival, unless it falls at or after deadline or
// the MaxOps budget is spent.
func (s *schedule) next(deadline time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.Before(deadline) || (s.max > 0 && s.taken >= s.max) {
		return time.Time{}, false
	}
	at := s.at
	s.taken++
	s.advance()
	return at, true
}

// spent reports whether the MaxOps budget of arrivals is used up.
func (s *schedule) spent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max > 0 && s.taken >= s.max
}
