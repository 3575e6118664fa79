package nemesis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
)

// plan is what a scenario does to one case: a section hook the judge
// calls for every grant (a section that holds long, a holder whose
// process stops), and a schedule that breaks servers from the start of
// the case. Either may be nil.
type plan struct {
	section judge.SectionHook
	// schedule runs from the start barrier with a context that ends when
	// the load stops. It reads the start from n (n.at), records each
	// injection and its window (n.inject) and its trouble (n.fail), and
	// returns soon after ctx ends, having healed what it broke. When it
	// returns before ctx ends, it has what it came for (its tested
	// injections): the case then ends at its planned length, or at once
	// if that has passed.
	schedule func(ctx context.Context, n *Nemesis)
	// planned is how long the case is planned to run; stretch is how much
	// longer it may run, at most, for a schedule to get its tested
	// injections (see Nemesis.Duration).
	planned, stretch time.Duration
	// strike is the strike the schedule repeats, for a scenario that
	// drives one (drive): what a mixed schedule draws from.
	strike *strike
}

// Nemesis is one case's fault at work: a peer of the case's clients,
// made by Fault.Nemesis. Attached to the case's judge, it answers the
// judge's section hook and stops and resumes the client processes the
// hook pauses (a judge.Pauser); from the start barrier it runs the fault's
// schedule against the servers. It records every injection, its targets
// and window, and every failure to inject, and returns them from Stop. It
// is safe for concurrent use.
type Nemesis struct {
	plan plan

	mu        sync.Mutex
	c         judge.Peer
	start     time.Time // zero until the start barrier
	cancel    func()
	procs     map[int]Process
	nets      clientNets
	selfStops map[int]selfStop // processes a Pause arms to stop themselves (armSelf)
	windows   []results.Window
	open      map[int]openWindow
	nextID    int
	failed    []string
	targets   []results.Target
	notes     []string
	lost      string
	// keyGrants counts the grants of each key, as the section hook saw
	// them: what a fault's danger window waits for (reachedWhileOpen).
	keyGrants map[string]int64
	// armed, when set, is the action the next grant gets, and where the
	// grant is sent: a schedule waiting to strike at a held key.
	armed *arming

	running sync.WaitGroup // the schedule
	pauses  sync.WaitGroup // client pauses not yet resumed
}

type openWindow struct {
	label string
	from  time.Time
}

func newNemesis() *Nemesis {
	return &Nemesis{procs: map[int]Process{}, selfStops: map[int]selfStop{}, open: map[int]openWindow{}, keyGrants: map[string]int64{}}
}

// Record is what a nemesis did in one case.
type Record struct {
	// Windows are the fault windows, in the order they began, from the
	// case start (results.Case.FaultWindows).
	Windows []results.Window
	// Targets are what each injection hit, one per injection, numbered
	// from 1.
	Targets []results.Target
	// Failures say, with their time, where the fault did not inject as
	// planned (a node that would not die or come back, a proxy that would
	// not cut), or its effect could not be read back: the case then did
	// not measure what its name promises.
	Failures []string
	// Notes say what a reader of the case must know of its injections:
	// how many tested what they were meant to, of how many asked, and
	// why the case ran longer or ended with fewer.
	Notes []string
	// Lost, when set, says that the servers did not come back from the
	// fault, which was its true outcome (a consensus majority that lost
	// its data): the runner must not use them again.
	Lost string
}

// Attach puts n on judge case c (the case itself, or a judge.RemotePeer
// of a judge on another host) before its clients start: the judge asks
// n's section hook about every grant, and n carries out the pauses it
// asks for. From the moment c's clients pass the start barrier, n's
// schedule runs until duration has passed, ctx ends or Stop is called,
// whichever comes first. Call Attach once.
func (n *Nemesis) Attach(ctx context.Context, c judge.Peer, duration time.Duration) {
	c.SetHooks(n.section, n)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopOnCancel := context.AfterFunc(ctx, cancel)
	n.mu.Lock()
	n.c = c
	n.cancel = func() {
		cancel()
		stopOnCancel()
	}
	n.mu.Unlock()
	n.running.Go(func() {
		select {
		case <-c.Started():
		case <-sctx.Done():
			return
		}
		if c.Start().IsZero() || n.plan.schedule == nil {
			return // the case was cancelled before its start, or there is nothing to run
		}
		start := n.begin(c.Start())
		dctx, cancel := context.WithDeadline(sctx, start.Add(duration))
		defer cancel()
		n.plan.schedule(dctx, n)
		if dctx.Err() == nil && n.at(dctx, n.plan.planned) {
			c.Enough() // the schedule has what it came for
		}
	})
}

// Duration is how long the case may run: its planned length, and, for a
// fault that strikes on a schedule, the time to make up for injections
// that tested nothing (a lock that did not grant, no section open at the
// strike) up to a cap. A case opened for that long ends as soon as its
// schedule has its tested injections and its planned length has passed
// (judge.Case.Enough).
func (n *Nemesis) Duration() time.Duration {
	if n.plan.schedule == nil {
		return n.plan.planned
	}
	return n.plan.planned + n.plan.stretch
}

// arming is a schedule's wait for the next grant.
type arming struct {
	action judge.Action
	grant  chan judge.SectionEvent // buffered: the hook never blocks
}

// section is the judge's section hook: the next grant after arm gets the
// armed action and wakes the schedule; the others, the plan's.
func (n *Nemesis) section(ev judge.SectionEvent) judge.Action {
	n.mu.Lock()
	a := n.armed
	n.armed = nil
	n.keyGrants[ev.Key]++
	n.mu.Unlock()
	if a != nil {
		a.grant <- ev
		return a.action
	}
	if n.plan.section != nil {
		return n.plan.section(ev)
	}
	return judge.Action{}
}

// arm makes the next grant get action a, and returns where that grant is
// sent. A second arm replaces the first.
func (n *Nemesis) arm(a judge.Action) <-chan judge.SectionEvent {
	ch := make(chan judge.SectionEvent, 1)
	n.mu.Lock()
	n.armed = &arming{action: a, grant: ch}
	n.mu.Unlock()
	return ch
}

// disarm withdraws an arming no grant took.
func (n *Nemesis) disarm() {
	n.mu.Lock()
	n.armed = nil
	n.mu.Unlock()
}

// live is the judge's view of the case now (empty before Attach).
func (n *Nemesis) live() judge.Live {
	n.mu.Lock()
	c := n.c
	n.mu.Unlock()
	if c == nil {
		return judge.Live{}
	}
	return c.Live()
}

// grantsOf is how many grants of key the section hook has seen.
func (n *Nemesis) grantsOf(key string) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.keyGrants[key]
}

// acquiring is the clients in Acquire now, by the judge's account, with
// since when (none before Attach).
func (n *Nemesis) acquiring() map[int]time.Duration {
	n.mu.Lock()
	c := n.c
	n.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Acquiring()
}

// keyPrefix is the prefix of the case's keys ("" before Attach).
func (n *Nemesis) keyPrefix() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c == nil {
		return ""
	}
	return n.c.KeyPrefix()
}

// since is now on the case clock (0 before the start).
func (n *Nemesis) since() time.Duration {
	start, ok := n.started()
	if !ok {
		return 0
	}
	return time.Since(start)
}

// note adds a note to the record.
func (n *Nemesis) note(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, fmt.Sprintf(format, args...))
}

// Stop ends n: its schedule's context ends, and Stop waits until the
// schedule has healed what it broke and returned and every paused client
// has been resumed; it closes the windows still open and returns the
// record, which it also gives the case's judge (judge.Peer.Injected):
// the judge's result carries it. A nemesis whose case never started
// records nothing.
func (n *Nemesis) Stop() Record {
	n.mu.Lock()
	cancel, c := n.cancel, n.c
	n.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	n.running.Wait()
	end := time.Now()
	n.pauses.Wait()
	rec := n.record(end)
	if c != nil {
		err := c.Injected(judge.Injections{Windows: rec.Windows, Targets: rec.Targets, Failures: rec.Failures, Notes: rec.Notes})
		if err != nil {
			rec.Notes = append(rec.Notes, "the judge did not record the injections: "+err.Error())
		}
	}
	return rec
}

// begin sets the start of the case, once, and returns it.
func (n *Nemesis) begin(start time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.start.IsZero() {
		n.start = start
	}
	return n.start
}

// started returns the start of the case, or false before the start
// barrier.
func (n *Nemesis) started() (time.Time, bool) {
	n.mu.Lock()
	start, c := n.start, n.c
	n.mu.Unlock()
	if !start.IsZero() || c == nil {
		return start, !start.IsZero()
	}
	select {
	case <-c.Started(): // a grant can come before the schedule's goroutine saw the barrier
		if s := c.Start(); !s.IsZero() { // zero: cancelled before its start
			return n.begin(s), true
		}
	default:
	}
	return time.Time{}, false
}

// at waits until d after the start, and reports false if ctx ended first,
// so a schedule can write "at 2s kill a node" as
// if !n.at(ctx, 2*time.Second) { return }.
func (n *Nemesis) at(ctx context.Context, d time.Duration) bool {
	start, _ := n.started()
	t := time.NewTimer(time.Until(start.Add(d)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fail records that the fault did not go as planned; a nil err records
// nothing.
func (n *Nemesis) fail(err error) {
	if err == nil {
		return
	}
	start, _ := n.started()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failed = append(n.failed, fmt.Sprintf("at %.3fs: %v", time.Since(start).Seconds(), err))
}

// inject records one injection of the fault, on target, and opens its
// window (labelled label); the injection's end closes the window, and
// does nothing when called again, and its prove records what it tested.
// Injections are numbered from 1 in the order they are recorded.
func (n *Nemesis) inject(label string, target results.Target) *injection {
	n.mu.Lock()
	defer n.mu.Unlock()
	target.Injection = len(n.targets) + 1
	target.AtS = time.Since(n.start).Seconds()
	n.targets = append(n.targets, target)
	id := n.nextID
	n.nextID++
	n.open[id] = openWindow{label: label, from: time.Now()}
	return &injection{n: n, index: len(n.targets) - 1, window: id}
}

// injection is one recorded injection.
type injection struct {
	n      *Nemesis
	index  int // in n.targets
	window int // its window's id
}

// end closes the injection's window.
func (j *injection) end() { j.n.close(j.window, time.Now()) }

// prove records what the injection tested: whether it met what its class
// is meant to test and had its effect read back (p.tested), and why not.
func (j *injection) prove(p proof) {
	j.n.mu.Lock()
	defer j.n.mu.Unlock()
	t := &j.n.targets[j.index]
	tested := p.tested
	t.Tested = &tested
	t.WhyNot = ""
	if !tested {
		t.WhyNot = p.whyNot
	}
	t.Precondition, t.Effect = p.precondition, p.effect
}

// tested counts the injections proved tested so far.
func (n *Nemesis) tested() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, t := range n.targets {
		if t.Tested != nil && *t.Tested {
			k++
		}
	}
	return k
}

// close closes window id at at, if it is open.
func (n *Nemesis) close(id int, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.open[id]
	if !ok {
		return
	}
	delete(n.open, id)
	n.windows = append(n.windows, results.Window{
		Label:  w.label,
		StartS: w.from.Sub(n.start).Seconds(),
		EndS:   at.Sub(n.start).Seconds(),
	})
}

// record closes every open window at end and returns the record.
func (n *Nemesis) record(end time.Time) Record {
	if _, ok := n.started(); !ok {
		return Record{}
	}
	n.mu.Lock()
	ids := make([]int, 0, len(n.open))
	for id := range n.open {
		ids = append(ids, id)
	}
	n.mu.Unlock()
	for _, id := range ids {
		n.close(id, end)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	w := append([]results.Window{}, n.windows...)
	slices.SortStableFunc(w, func(a, b results.Window) int { return cmp.Compare(a.StartS, b.StartS) })
	targets := append([]results.Target(nil), n.targets...)
	for i := range targets {
		if targets[i].Tested == nil { // cut short by the end of the case
			no := false
			targets[i].Tested, targets[i].WhyNot = &no, "the case ended before the injection was proved"
		}
	}
	return Record{Windows: w, Targets: targets, Failures: append([]string(nil), n.failed...),
		Notes: append([]string(nil), n.notes...), Lost: n.lost}
}
