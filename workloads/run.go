package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// errorPause is the least a closed-loop client waits after a failed
// acquire, so that a backend failing fast is not hammered in a busy loop.
const errorPause = time.Millisecond

// Why a run stopped (Outcome.Stopped), so that a report can tell a
// complete case from a cut one.
const (
	// StopDuration: Spec.Duration elapsed.
	StopDuration = "duration"
	// StopMaxOps: Spec.MaxOps operations ran.
	StopMaxOps = "max-ops"
	// StopContext: the caller's context ended; the case is partial.
	StopContext = "context"
	// StopFatal: the backend refused the spec (locker.ErrInvalid or
	// locker.ErrClosed), so going on would only count the same error.
	StopFatal = "fatal"
)

// Run runs spec against lockers, one per client (clients do not share
// connections, as separate processes would not), with every critical
// section working on res, and returns what it measured. A nil res is a
// fresh resource with GuardNone; a res that has already seen sections is
// refused, since its counts would mix with this run's. Run does not close
// the lockers.
//
// Each operation acquires a key (under Spec.AcquireTimeout), grants the
// section on res, lets hooks.Section stall it, reads the counter, holds,
// writes the counter+1, ends the section and releases. The load stops at
// Spec.Duration, after Spec.MaxOps operations or when ctx ends, whichever
// comes first: acquires in flight are abandoned (not counted as errors),
// sections in progress cut their hold short but still write, stalls run
// to their end, and leases are released. Run then waits for
// hooks.Nemesis to return.
//
// The error is non-nil for a bad spec or arguments (the outcome is then
// nil), or, with the outcome of what ran, when ctx ended (wrapping its
// cause) or when the backend refused the spec itself (an acquire failing
// with locker.ErrInvalid or locker.ErrClosed).
func Run(ctx context.Context, spec Spec, lockers []locker.Locker, res *Resource, hooks Hooks) (*Outcome, error) {
	s, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	if len(lockers) != s.Clients {
		return nil, locker.Invalidf("%d lockers for %d clients: need one Locker per client", len(lockers), s.Clients)
	}
	for i, l := range lockers {
		if l == nil {
			return nil, locker.Invalidf("locker %d of %d is nil", i, len(lockers))
		}
	}
	if res == nil {
		res, _ = NewResource(GuardNone)
	}
	if n := res.Report().Sections; n > 0 {
		return nil, locker.Invalidf("resource already saw %d sections: give each run a fresh one, or its counts mix with this run's", n)
	}
	e := &engine{spec: s, res: res, hooks: hooks, keys: s.KeyNames()}
	e.opts = append([]locker.Option{locker.WithTTL(s.TTL)}, s.AcquireOptions...)
	info := lockers[0].Info()

	e.start = time.Now()
	e.rec, _ = NewRecorder(e.start, s.TimelineStep)
	e.faults = newFaults(e.start)
	res.setEpoch(e.start)
	if s.Rate > 0 {
		e.sched = newSchedule(e.start, s.Rate, s.MaxOps, rand.New(rand.NewPCG(s.Seed, 0x5eed)))
	}
	// The load's context ends only through stop, so that its cause is
	// always known and an acquire's own deadline is never confused with
	// the caller's.
	var cancel context.CancelFunc
	e.load, cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	e.stopLoad = cancel
	deadline := time.AfterFunc(s.Duration, func() { e.stop(StopDuration, nil) })
	defer deadline.Stop()
	defer context.AfterFunc(ctx, func() { e.stop(StopContext, context.Cause(ctx)) })()

	var clients, nemesis sync.WaitGroup
	if hooks.Nemesis != nil {
		nemesis.Go(func() { hooks.Nemesis(e.load, e.faults) })
	}
	for i, l := range lockers {
		c := &client{id: i, m: Measure(l, e.rec), r: rand.New(rand.NewPCG(s.Seed, uint64(i)+1)), timer: time.NewTimer(time.Hour)}
		c.timer.Stop()
		c.keys = newChooser(s, e.keys, c.r)
		clients.Go(func() {
			if e.sched != nil {
				e.openLoop(c)
			} else {
				e.closedLoop(c)
			}
		})
	}
	clients.Wait()
	done := time.Now()
	e.stop(StopMaxOps, nil)
	nemesis.Wait()

	o := e.outcome(info, done, time.Now())
	if e.stopErr != nil {
		return o, e.stopErr
	}
	return o, nil
}

// engine is the state of one Run shared by its clients.
type engine struct {
	spec   Spec
	res    *Resource
	rec    *Recorder
	faults *Faults
	hooks  Hooks
	keys   []string
	opts   []locker.Option
	sched  *schedule
	start  time.Time

	load     context.Context // ends when the load stops
	stopLoad context.CancelFunc

	ops      atomic.Int64 // operations started
	sections atomic.Int64 // sections granted, numbering them for the hook

	stopOnce  sync.Once
	stoppedAt time.Time // written once in stop, read after the clients are done
	stopWhy   string
	stopErr   error
}

// stop ends the load, once, remembering when and why.
func (e *engine) stop(why string, err error) {
	e.stopOnce.Do(func() {
		e.stoppedAt, e.stopWhy = time.Now(), why
		switch why {
		case StopContext:
			e.stopErr = fmt.Errorf("run stopped after %v: %w", e.stoppedAt.Sub(e.start).Round(time.Millisecond), err)
		case StopFatal:
			e.stopErr = err
		}
		e.stopLoad()
	})
}

// client is one client's private state.
type client struct {
	id    int
	m     *Measured
	r     *rand.Rand
	keys  *chooser
	timer *time.Timer
}

// sleep waits d, or until ctx ends (then it returns false). A nil ctx
// cannot end.
func (c *client) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx == nil || ctx.Err() == nil
	}
	if ctx == nil {
		time.Sleep(d)
		return true
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

// closedLoop: acquire, hold, release, think, until the load stops.
func (e *engine) closedLoop(c *client) {
	for e.load.Err() == nil && e.claim() {
		think := e.spec.Think.Sample(c.r)
		if !e.operate(c, time.Now()) {
			think = max(think, errorPause)
		}
		if !c.sleep(e.load, think) {
			return
		}
	}
}

// openLoop serves the arrivals of the shared Poisson schedule: each
// client takes the next arrival, waits for its time if it is still to
// come, and runs it, latency counted from the arrival's time.
func (e *engine) openLoop(c *client) {
	deadline := e.start.Add(e.spec.Duration)
	for {
		at, ok := e.sched.next(deadline)
		if !ok {
			if !e.sched.spent() {
				// The arrivals ran up to the deadline: the load ends by
				// Duration, not by this client quitting early.
				<-e.load.Done()
			}
			return
		}
		if !c.sleep(e.load, time.Until(at)) || e.load.Err() != nil {
			return
		}
		e.ops.Add(1)
		e.operate(c, at)
	}
}

// operate runs one operation whose latency counts from start, and reports
// whether the lock was granted.
func (e *engine) operate(c *client, start time.Time) bool {
	key, _ := c.keys.next()
	actx, cancel := context.WithTimeout(e.load, e.spec.AcquireTimeout)
	lease, err := c.m.AcquireFrom(actx, start, key, e.opts...)
	cancel()
	if err != nil {
		if (errors.Is(err, locker.ErrInvalid) || errors.Is(err, locker.ErrClosed)) && e.load.Err() == nil {
			e.stop(StopFatal, fmt.Errorf("client %d: acquire %q: %w", c.id, key, err))
		}
		return false
	}
	e.section(c, lease)
	return true
}

// section is one critical section on a granted lease.
func (e *engine) section(c *client, lease locker.Lease) {
	hold := e.spec.Hold.Sample(c.r)
	seq := e.sections.Add(1)
	var st Stall
	if e.hooks.Section != nil {
		st = e.hooks.Section(SectionInfo{
			Client: c.id, Seq: seq, Key: lease.Key(), Lease: lease,
			Granted: time.Since(e.start), Hold: hold,
		})
	}
	g := GrantOf(lease)
	var sec Section
	if st.For > 0 && st.At == BeforeRead {
		sec = e.res.Grant(g)
		e.stall(c, st)
		sec.Read()
	} else {
		sec = e.res.Begin(g)
	}
	c.sleep(e.load, hold)
	if st.For > 0 && st.At == BeforeWrite {
		e.stall(c, st)
	}
	sec.Write()
	sec.End()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(e.load), e.spec.AcquireTimeout)
	_ = lease.Release(rctx) // the decorator counts its failure
	cancel()
}

// stall pauses the holder for st.For, whatever happens to the run.
func (e *engine) stall(c *client, st Stall) {
	var end func()
	if st.Label != "" {
		end = e.faults.Begin(fmt.Sprintf("%s client %d", st.Label, c.id))
	}
	c.sleep(nil, st.For)
	if end != nil {
		end()
	}
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

// counts returns the arrivals taken so far and about how many more
// (the expected number, within the MaxOps budget) fall before deadline.
// Call it once the clients are done.
func (s *schedule) counts(deadline time.Time) (taken, untaken int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.Before(deadline) {
		untaken = 1 + int64(deadline.Sub(s.at).Seconds()/s.mean)
	}
	if s.max > 0 {
		untaken = min(untaken, s.max-s.taken)
	}
	return s.taken, untaken
}
