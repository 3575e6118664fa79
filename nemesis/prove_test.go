package nemesis

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends/noop"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/workloads"
)

// runStretched runs n beside 2 goroutine clients of the noop control with
// spec's load, for as long as n says the case may run (its Duration), as
// the runner composes a case.
func runStretched(t *testing.T, n *Nemesis, spec workloads.Spec) (*judge.Result, Record) {
	t.Helper()
	spec.Duration = n.Duration()
	return runCase(t, n, spec)
}

// runCase runs n beside spec.Clients goroutine clients of the noop control
// with spec's load for spec.Duration, composed as the runner composes a
// case, and returns the judge's result and n's record.
func runCase(t *testing.T, n *Nemesis, spec workloads.Spec) (*judge.Result, Record) {
	t.Helper()
	return runGated(t, n, spec, nil)
}

// gated is a client's lock on a fake cluster whose servers a fault can
// bring down: while down is locked, no Acquire is granted, as no lock
// grants with its servers down. A grant counts from when the judge hears
// of it (its Grant report, gatedConn), so a grant holds the gate open
// until then: a fault that locks down strikes after every grant made
// before it is on the judge's books, never between the two.
type gated struct {
	locker.Locker
	down *sync.RWMutex
	held *bool // a grant not yet reported holds down's read lock
}

func (g gated) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	g.down.RLock()
	l, err := g.Locker.Acquire(ctx, key, opts...)
	if err != nil {
		g.down.RUnlock()
		return nil, err
	}
	*g.held = true // the client's next call on the judge is its Grant
	return l, nil
}

// gatedConn is the judge's connection of a gated client: its Grant
// report lets the gate go.
type gatedConn struct {
	judge.Conn
	g gated
}

func (c gatedConn) Grant(ctx context.Context, r judge.GrantReport) (judge.Grant, error) {
	defer func() {
		if *c.g.held {
			*c.g.held = false
			c.g.down.RUnlock()
		}
	}()
	return c.Conn.Grant(ctx, r)
}

// runGated is runCase with each client's lock gated by down, when set.
func runGated(t *testing.T, n *Nemesis, spec workloads.Spec, down *sync.RWMutex) (*judge.Result, Record) {
	t.Helper()
	j, err := judge.New(judge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	info, err := j.Open(ctx, "local", judge.CaseSpec{ID: "case", Guards: []judge.Guard{judge.GuardNone}, Processes: spec.Clients, Duration: spec.Duration, TimelineStep: spec.TimelineStep})
	if err != nil {
		t.Fatal(err)
	}
	spec.KeyPrefix = info.KeyPrefix
	c := j.Case("case")
	n.Attach(ctx, c, spec.Duration)
	clients := make([]workloads.Client, spec.Clients)
	for i := range clients {
		var l locker.Locker = noop.New()
		defer l.Close()
		var conn judge.Conn = c.Local("local", info.FirstProcess+i)
		if down != nil {
			g := gated{l, down, new(bool)}
			l, conn = g, gatedConn{conn, g}
		}
		clients[i] = workloads.Client{Process: info.FirstProcess + i, Locker: l, Judge: conn}
	}
	runErr := workloads.Run(ctx, spec, clients)
	rec := n.Stop()
	res, err := j.Finish(ctx, "local", "case")
	if err := errors.Join(runErr, err); err != nil {
		t.Fatal(err)
	}
	return res, rec
}

// driven returns a nemesis that drives s over e's schedule.
func driven(e Env, s strike) *Nemesis {
	n := newNemesis()
	n.plan = e.drive(s)
	return n
}

func loadOf(t *testing.T, d time.Duration, think time.Duration) workloads.Spec {
	t.Helper()
	hold, _ := workloads.Constant(time.Millisecond)
	th, _ := workloads.Constant(think)
	spec, err := workloads.Spec{Workload: workloads.Hot, Clients: 2, Hold: hold, Think: th, TTL: 200 * time.Millisecond, Duration: d}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

var fakeNodes = []Node{&compose.Node{Name: "a"}, &compose.Node{Name: "b"}, &compose.Node{Name: "c"}}

// TestDriveProvesItsInjections: each injection waits for a grant, strikes
// while that section is open (held long), records what it met and what
// the strike read back, and the case ends once it has its tested
// injections and its planned length — well before its cap, and without
// reading as stopped early.
func TestDriveProvesItsInjections(t *testing.T) {
	defer goleak.VerifyNone(t)
	spec := loadOf(t, 1200*time.Millisecond, 0)
	e := Env{Target: Target{Nodes: fakeNodes}, Spec: spec, Lease: 200 * time.Millisecond, Injections: 2, Rand: rand.New(rand.NewPCG(1, 2))}
	var keys []string
	n := driven(e, strike{label: "poked", hold: 100 * time.Millisecond, exclusion: true,
		pick: func(context.Context, int) ([]Node, error) { return e.majority(), nil },
		do: func(_ context.Context, a attempt) (string, error) {
			keys = append(keys, a.key)
			a.struck()
			return "poked " + names(a.nodes), nil
		}})
	if n.Duration() <= spec.Duration {
		t.Fatalf("a driven case may run %v, no longer than planned (%v): nothing to make up with", n.Duration(), spec.Duration)
	}
	res, rec := runStretched(t, n, spec)
	if len(rec.Targets) != 2 || len(rec.Failures) != 0 {
		t.Fatalf("record %+v: want two injections, no failure", rec)
	}
	for i, tg := range rec.Targets {
		if tg.Tested == nil || !*tg.Tested || !strings.Contains(tg.Precondition, "open when the fault struck") || !strings.HasPrefix(tg.Effect, "poked ") {
			t.Errorf("injection %+v: want it tested, with its precondition and effect", tg)
		}
		if !strings.HasSuffix(keys[i], "hot") {
			t.Errorf("injection %d met key %q: want the hot key", i+1, keys[i])
		}
	}
	if res.Stopped != "" || res.Elapsed >= res.Duration || res.Elapsed < spec.Duration {
		t.Fatalf("the case ran %v of at most %v (planned %v), stopped %q: want it ended once its injections were tested, not before its planned length",
			res.Elapsed, res.Duration, spec.Duration, res.Stopped)
	}
}

// TestDriveCountsOnlyWhatTested: a lock that grants nothing leaves every
// strike untested, with why; the schedule strikes again (at most twice as
// often as asked) and says how many it got.
func TestDriveCountsOnlyWhatTested(t *testing.T) {
	defer goleak.VerifyNone(t)
	spec := loadOf(t, time.Second, time.Hour) // each client grants once, then thinks
	e := Env{Target: Target{Nodes: fakeNodes}, Spec: spec, Lease: 200 * time.Millisecond, Injections: 1, Rand: rand.New(rand.NewPCG(1, 2)), wait: 300 * time.Millisecond}
	n := driven(e, strike{label: "poked", exclusion: true,
		pick: func(context.Context, int) ([]Node, error) { return e.minority(), nil },
		do:   func(_ context.Context, a attempt) (string, error) { a.struck(); return "poked", nil }})
	// Half a second beyond the stretched length: the second strike comes
	// about 70 ms before it ends, which a loaded machine can miss (the
	// stretch's own sizing is TestDriveStretchesForUntested's), and the
	// cap of twice the strikes asked must hold however long it runs.
	spec.Duration = n.Duration() + 500*time.Millisecond
	_, rec := runCase(t, n, spec)
	if len(rec.Targets) != 2 {
		t.Fatalf("targets %+v: want 2 strikes for the 1 tested injection asked", rec.Targets)
	}
	for _, tg := range rec.Targets {
		if tg.Tested == nil || *tg.Tested || !strings.Contains(tg.WhyNot, "granted nothing") {
			t.Errorf("injection %+v: want it untested, the lock granting nothing", tg)
		}
	}
	if len(rec.Notes) != 1 || !strings.Contains(rec.Notes[0], "0 of the 1 injections") {
		t.Fatalf("notes %q: want how many tested of how many asked", rec.Notes)
	}
}

// TestDriveStopsAtAFailureOrALoss: a strike whose effect cannot be read
// back fails its case and ends the schedule; servers that do not come
// back are the fault's outcome: the injection tested, the record says the
// servers are lost, and nothing more strikes.
func TestDriveStopsAtAFailureOrALoss(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		err    error
		tested bool
	}{
		{errors.New("no read back"), false},
		{lost{errors.New("member refused")}, true},
		{untested{"a clock nobody reads"}, false},
	} {
		spec := loadOf(t, time.Second, 0)
		e := Env{Target: Target{Nodes: fakeNodes}, Spec: spec, Lease: 200 * time.Millisecond, Injections: 2, Rand: rand.New(rand.NewPCG(1, 2))}
		n := driven(e, strike{label: "poked", exclusion: true,
			pick: func(context.Context, int) ([]Node, error) { return e.minority(), nil },
			do:   func(_ context.Context, a attempt) (string, error) { a.struck(); return "", tc.err }})
		_, rec := runStretched(t, n, spec)
		var u untested
		switch {
		case errors.As(tc.err, &u):
			if len(rec.Targets) != 4 || len(rec.Failures) != 0 || *rec.Targets[0].Tested || rec.Targets[0].WhyNot != u.why {
				t.Errorf("%v: record %+v: want four untested strikes, no failure", tc.err, rec)
			}
		case tc.tested:
			if len(rec.Targets) != 1 || !*rec.Targets[0].Tested || rec.Lost == "" || len(rec.Failures) != 0 {
				t.Errorf("%v: record %+v: want one tested injection, the servers lost, no failure", tc.err, rec)
			}
		default:
			if len(rec.Targets) != 1 || *rec.Targets[0].Tested || len(rec.Failures) != 1 {
				t.Errorf("%v: record %+v: want one failed injection, and no more", tc.err, rec)
			}
		}
	}
}

// TestDangerWindow: a fault that may cost the section it met its lock
// (restart, crash, power loss) tests exclusion only if another client
// asks for the key, or is granted it, after the servers are back while
// that section is still open. A recovery that outlasts the section tested
// nothing, though the section was open when the fault struck (the old
// rule counted it tested).
func TestDangerWindow(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name     string
		recovery time.Duration
		tested   bool
		says     string
	}{
		{"recovery inside the section", 0, true, "the danger window was reached: "},
		{"recovery outlasts the section", 400 * time.Millisecond, false, "recovery outlasted the section"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := loadOf(t, 1200*time.Millisecond, 0)
			e := Env{Target: Target{Nodes: fakeNodes}, Spec: spec, Lease: 200 * time.Millisecond, Injections: 2, Rand: rand.New(rand.NewPCG(1, 2))}
			var down sync.RWMutex
			n := driven(e, strike{label: "down and up", hold: 100 * time.Millisecond, exclusion: true, danger: true,
				pick: func(context.Context, int) ([]Node, error) { return e.majority(), nil },
				do: func(ctx context.Context, a attempt) (string, error) {
					down.Lock()
					defer down.Unlock()
					a.struck()
					sleepUntil(ctx, time.Now().Add(tc.recovery)) // the nodes coming back
					return "back", nil
				}})
			spec.Duration = n.Duration()
			_, rec := runGated(t, n, spec, &down)
			if len(rec.Targets) == 0 || len(rec.Failures) != 0 {
				t.Fatalf("record %+v: want injections, no failure", rec)
			}
			for _, tg := range rec.Targets {
				if !strings.Contains(tg.Precondition, "open when the fault struck") {
					t.Errorf("injection %+v: want the section open at the strike", tg)
				}
				if tg.Tested == nil || *tg.Tested != tc.tested || !strings.Contains(tg.Precondition, tc.says) {
					t.Errorf("injection %+v: want tested %v, its precondition saying %q", tg, tc.tested, tc.says)
				}
				if !tc.tested && !strings.Contains(tg.WhyNot, tc.says) {
					t.Errorf("injection %+v: want why not %q", tg, tc.says)
				}
			}
		})
	}
}
