package workloads

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// Hooks are how fault scenarios (the nemesis) act on a run without the
// engine knowing about them. Both may be nil.
type Hooks struct {
	// Section is called by a client for every granted section, before the
	// section touches the resource, and decides whether it stalls. It is
	// called concurrently from every client and must be cheap and safe for
	// concurrent use.
	Section SectionHook
	// Nemesis, when set, runs in its own goroutine from the start of the
	// load, with a context that ends when the load stops (Duration,
	// MaxOps, or the run's context). It injects faults, reading the start
	// time from f and recording each fault's window into f. Run waits for
	// it to return before it builds the outcome, so it must return soon
	// after ctx ends, having healed what it broke.
	Nemesis func(ctx context.Context, f *Faults)
}

// Phase is where in a critical section a stall happens.
type Phase uint8

const (
	// BeforeWrite stalls after the section has read the resource and held
	// for its hold time, just before it writes: Kleppmann's GC pause. A
	// stall past the TTL lets another client in; the write that follows is
	// stale, and the guard decides whether it lands.
	BeforeWrite Phase = iota
	// BeforeRead stalls right after the grant, before the section shows
	// its token or marks the resource: the pause between acquiring and
	// marking that GuardCAS cannot tell apart from a live holder.
	BeforeRead
)

// String names the phase.
func (p Phase) String() string {
	if p == BeforeRead {
		return "before-read"
	}
	return "before-write"
}

// Stall is a SectionHook's verdict: stall the section for For at At. The
// stall is a pause of the holder, not of the run: it is not cut short when
// the run's context ends, since a holder woken early would write before
// its lease ran out and hide the stale write being measured; Run waits for
// it (so a run can outlast Duration by the longest stall in progress). A
// zero Stall does nothing.
type Stall struct {
	For time.Duration
	At  Phase
	// Label, when set, records the stall as a fault window (the label
	// followed by the client number).
	Label string
}

// SectionInfo describes a granted section to a SectionHook.
type SectionInfo struct {
	// Client is the number of the client running the section (0-based).
	Client int
	// Seq numbers the run's sections in the order clients were granted
	// them, from 1.
	Seq int64
	// Key is the key granted; Lease is the lease (its token, validity and
	// Done channel let a hook choose, for example, to stall until the
	// lease has ended).
	Key   string
	Lease locker.Lease
	// Granted is when the grant happened, from the start of the run.
	Granted time.Duration
	// Hold is the hold time the section drew.
	Hold time.Duration
}

// SectionHook decides whether a section stalls; see Hooks.Section.
type SectionHook func(SectionInfo) Stall

// EveryNth returns a hook that stalls every n-th section of the run (Seq
// divisible by n) with s, and leaves the others alone; n < 1 stalls none.
func EveryNth(n int64, s Stall) SectionHook {
	return func(i SectionInfo) Stall {
		if n < 1 || i.Seq%n != 0 {
			return Stall{}
		}
		return s
	}
}

// Between returns a hook that stalls with s every section granted in
// [from, to) from the start of the run, and leaves the others alone.
func Between(from, to time.Duration, s Stall) SectionHook {
	return func(i SectionInfo) Stall {
		if i.Granted < from || i.Granted >= to {
			return Stall{}
		}
		return s
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
}

type openWindow struct {
	label string
	from  time.Time
}

func newFaults(start time.Time) *Faults {
	return &Faults{start: start, open: make(map[int]openWindow)}
}

// Start is the start of the run: time zero of the timeline, of every
// window and of SectionInfo.Granted.
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

// failures returns what Fail recorded, in order.
func (f *Faults) failures() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.failed...)
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

// finish closes every open window at at and returns all windows in the
// order they began.
func (f *Faults) finish(at time.Time) []results.Window {
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
