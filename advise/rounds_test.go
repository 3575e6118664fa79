package advise_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/lockbench/lockbench/advise"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/results"
)

// record is a RunFunc that measures nothing: it records each round's
// cases as results (one per case, every injection tested), so that the
// loop's scheduling can be followed without servers. The decisions come
// from the Decider under test.
type record struct {
	rounds [][]bench.Case
	file   results.File
	// block, when set, makes a round wait for its context to end (a
	// round the budget cuts).
	block bool
	// startBy is each round's time to start cases by; deadline its
	// context's.
	startBy, deadline []time.Time
}

func (r *record) run(ctx context.Context, cases []bench.Case, startBy time.Time) (*results.File, error) {
	r.rounds = append(r.rounds, cases)
	r.startBy = append(r.startBy, startBy)
	d, _ := ctx.Deadline()
	r.deadline = append(r.deadline, d)
	if r.block {
		<-ctx.Done()
		r.file.Partial = true
		return &r.file, ctx.Err()
	}
	for _, c := range cases {
		n := c.Injections
		r.file.Cases = append(r.file.Cases, results.Case{Backend: c.Backend.Spec, Fault: c.Fault.Spec, FaultClass: c.Fault.Class(),
			Trial: c.Trial, Guard: string(c.Guards[0]), FreshServers: c.Fresh, Injections: n, InjectionsTested: &n})
	}
	return &r.file, nil
}

// TestRounds: the loop runs round 1, then only what each look says is
// undecided, less what the results hold; it stops when decided, after
// Looks rounds, and when the budget ends inside a round.
func TestRounds(t *testing.T) {
	p := doneWhen()
	p.Backends = []string{"redis", "postgres?mode=lease"}
	pl, err := advise.New(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	need := results.Need{A: "redis", B: "postgres?mode=lease", Measure: results.MeasureLockBugs, Class: "restart", Injections: 10}
	looks := 0
	decide := func(f *results.File) (advise.Verdict, error) {
		looks++
		switch {
		case looks < 0: // never decided, always wanting more
			more := need
			more.Injections = 10 * (looks + 102)
			return advise.Verdict{Needs: []results.Need{more}}, nil
		case looks < 2:
			return advise.Verdict{Needs: []results.Need{need}}, nil
		}
		return advise.Verdict{Decided: true}, nil
	}
	r := &record{}
	_, v, err := pl.Rounds(context.Background(), r.run, decide, io.Discard)
	if err != nil || !v.Decided || len(r.rounds) != 2 {
		t.Fatalf("%d rounds, decided %v, error %v (want 2 rounds, decided)", len(r.rounds), v.Decided, err)
	}
	for _, c := range r.rounds[1] {
		if c.Fault.Class() != "restart" || (c.Backend.Spec != "redis" && c.Backend.Spec != "postgres?mode=lease") {
			t.Errorf("round 2 runs %s, which no need asked for", c)
		}
		if c.Injections != 7 {
			t.Errorf("round 2: %s with %d injections (want the 7 of 10 the first round's 3 left)", c, c.Injections)
		}
	}
	// Undecided, needs met: nothing more to run, the loop ends.
	r, looks = &record{}, 1
	_, v, err = pl.Rounds(context.Background(), r.run, func(*results.File) (advise.Verdict, error) {
		return advise.Verdict{Needs: []results.Need{{A: "redis", B: "postgres?mode=lease", Measure: results.MeasureLockBugs, Class: "restart", Injections: 3}}}, nil
	}, io.Discard)
	if err != nil || v.Decided || len(r.rounds) != 1 {
		t.Errorf("needs the results meet: %d rounds (want 1), decided %v, error %v", len(r.rounds), v.Decided, err)
	}
	// Never decided: Looks rounds, no more.
	r = &record{}
	looks = -100
	_, v, err = pl.Rounds(context.Background(), r.run, decide, io.Discard)
	if err != nil || v.Decided || len(r.rounds) != advise.Looks {
		t.Errorf("undecided: %d rounds (want %d), decided %v, error %v", len(r.rounds), advise.Looks, v.Decided, err)
	}
	// A budget that ends inside round 1: cut there, no error, one look.
	pl, err = advise.New(p, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r, looks = &record{block: true}, 0
	f, _, err := pl.Rounds(context.Background(), r.run, decide, io.Discard)
	if err != nil || len(r.rounds) != 1 || looks != 1 || !f.Partial {
		t.Errorf("budget cut: %d rounds, %d looks, partial %v, error %v (want 1, 1, true, nil)", len(r.rounds), looks, f.Partial, err)
	}
	// A service's budget: the rounds end Closing before it, for the
	// answer and the report; round 1 starts cases for three quarters of
	// the rounds' time, the rounds after it until their time ends; make
	// bench's runs its whole catalogue first.
	pl, err = advise.New(p, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r, looks = &record{}, 0
	before := time.Now()
	if _, _, err := pl.Rounds(context.Background(), r.run, decide, io.Discard); err != nil || len(r.startBy) != 2 {
		t.Fatalf("%d rounds, error %v (want 2)", len(r.startBy), err)
	}
	rounds := time.Hour - advise.Closing(time.Hour)
	if by := r.startBy[0]; by.Before(before.Add(rounds*3/4)) || by.After(time.Now().Add(rounds*3/4)) || !r.startBy[1].IsZero() {
		t.Errorf("rounds start cases by %v (want round 1 three quarters of %v from the start, round 2 unbounded)", r.startBy, rounds)
	}
	for _, d := range r.deadline {
		if d.Before(before.Add(rounds)) || d.After(time.Now().Add(rounds)) {
			t.Errorf("a round's deadline is %v from the start, want %v (the hour less %v for the answer and the report)",
				d.Sub(before), rounds, advise.Closing(time.Hour))
		}
	}
	if def, err := advise.New(advise.Default(), 20*time.Minute); err != nil || def.RoundOne != 0 {
		t.Errorf("make bench's round 1 starts cases for %v (want until the budget ends), error %v", def.RoundOne, err)
	}
	// Interrupted (not the budget): the error comes back.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pl, _ = advise.New(p, time.Hour)
	if _, _, err := pl.Rounds(ctx, (&record{block: true}).run, decide, io.Discard); err == nil {
		t.Error("an interrupted round returned no error")
	}
}
