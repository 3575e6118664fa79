package workloads

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// Hooks are how fault scenarios (the nemesis) act on a case without the
// clients knowing about them. Both may be nil.
type Hooks struct {
	// Section is installed on the judge: for every grant it decides
	// whether the section holds long or its holder's process pauses (see
	// judge.Action). It is called concurrently and must be cheap.
	Section judge.SectionHook
	// Nemesis, when set, runs in its own goroutine from the start of the
	// case, with a context that ends when the load stops. It injects
	// faults, reading the start time from f and recording each fault's
	// window into f. The case waits for it to return before it builds the
	// outcome, so it must return soon after ctx ends, having healed what
	// it broke.
	Nemesis func(ctx context.Context, f *Faults)
}

// EveryNth returns a hook that gives a every n-th section of the case
// (section number divisible by n) and leaves the others alone; n < 1
// touches none.
func EveryNth(n int64, a judge.Action) judge.SectionHook {
	return func(e judge.SectionEvent) judge.Action {
		if n < 1 || e.Section%n != 0 {
			return judge.Action{}
		}
		return a
	}
}

// Between returns a hook that gives a every section granted in [from, to)
// from the start of the case, and leaves the others alone.
func Between(from, to time.Duration, a judge.Action) judge.SectionHook {
	return func(e judge.SectionEvent) judge.Action {
		if e.Granted < from || e.Granted >= to {
			return judge.Action{}
		}
		return a
	}
}

// Faults is the nemesis's handle on a run: the run's start, against which
// faults are scheduled, and the record of fault windows that ends up in
// the outcome (results.Case.FaultWindows). It is safe for concurrent use.
type Faults struct {
	start time.Time

	mu      sync.Mutex
	windows []results.Window
	open    map[int]openWindow
	nextID  int
	failed  []string
	targets []results.Target
}

type openWindow struct {
	label string
	from  time.Time
}

// NewFaults returns the record of a case that started at start.
func NewFaults(start time.Time) *Faults {
	return &Faults{start: start, open: make(map[int]openWindow)}
}

// Start is the start of the case: time zero of the timeline, of every
// window and of judge.SectionEvent.Granted.
func (f *Faults) Start() time.Time { return f.start }

// Since is the time elapsed since the start.
func (f *Faults) Since() time.Duration { return time.Since(f.start) }

// At waits until d after the start, and reports false if ctx ended first,
// so a nemesis can write "at 2s kill a node" as
// if !f.At(ctx, 2*time.Second) { return }.
func (f *Faults) At(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(time.Until(f.start.Add(d)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Record records a fault window from from to to; to before from is an
// error naming both.
func (f *Faults) Record(label string, from, to time.Time) error {
	if to.Before(from) {
		return locker.Invalidf("fault window %q ends at %v, before it starts at %v", label, to.Sub(f.start), from.Sub(f.start))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.add(label, from, to)
	return nil
}

// Fail records that a fault did not go as planned (a node that would not
// die or come back, a proxy that would not cut): the outcome's notes say
// so, since the case then did not measure the fault its name promises.
// A nil err records nothing.
func (f *Faults) Fail(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, fmt.Sprintf("at %.3fs: %v", f.Since().Seconds(), err))
}

// Failures returns what Fail recorded, in order.
func (f *Faults) Failures() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.failed...)
}

// Inject records one injection of the fault, on target, and opens its
// window (labelled label); the returned function closes the window.
// Injections are numbered from 1 in the order they are recorded.
func (f *Faults) Inject(label string, target results.Target) (end func()) {
	f.mu.Lock()
	target.Injection = len(f.targets) + 1
	f.targets = append(f.targets, target)
	f.mu.Unlock()
	return f.Begin(label)
}

// Targets returns what each injection hit, in order; its length is the
// number of injections.
func (f *Faults) Targets() []results.Target {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]results.Target(nil), f.targets...)
}

// Begin opens a fault window now and returns the function that closes it.
// A window still open when the run ends is closed at that moment.
// Calling the returned function again does nothing.
func (f *Faults) Begin(label string) (end func()) {
	f.mu.Lock()
	id := f.nextID
	f.nextID++
	f.open[id] = openWindow{label: label, from: time.Now()}
	f.mu.Unlock()
	return func() { f.close(id, time.Now()) }
}

func (f *Faults) close(id int, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.open[id]
	if !ok {
		return
	}
	delete(f.open, id)
	f.add(w.label, w.from, at)
}

// add appends a window. The caller holds f.mu.
func (f *Faults) add(label string, from, to time.Time) {
	f.windows = append(f.windows, results.Window{
		Label:  label,
		StartS: from.Sub(f.start).Seconds(),
		EndS:   to.Sub(f.start).Seconds(),
	})
}

// Finish closes every open window at at and returns all windows in the
// order they began.
func (f *Faults) Finish(at time.Time) []results.Window {
	f.mu.Lock()
	ids := make([]int, 0, len(f.open))
	for id := range f.open {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.close(id, at)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := append([]results.Window{}, f.windows...)
	slices.SortStableFunc(w, func(a, b results.Window) int { return cmp.Compare(a.StartS, b.StartS) })
	return w
}

// StartNemesis runs n (when not nil) on f from f's start until the
// case's duration has passed or stop is called, whichever comes first,
// and returns stop: it ends n's context and waits for n to heal and
// return.
func StartNemesis(ctx context.Context, f *Faults, duration time.Duration, n func(context.Context, *Faults)) (stop func()) {
	if n == nil {
		return func() {}
	}
	nctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), f.start.Add(duration))
	stopOnCancel := context.AfterFunc(ctx, cancel)
	var wg sync.WaitGroup
	wg.Go(func() { n(nctx, f) })
	return func() {
		cancel()
		stopOnCancel()
		wg.Wait()
	}
}
