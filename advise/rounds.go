package advise

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/results"
)

// Verdict is what one look at the results says: the answer is decided,
// or these comparisons could still change it and need more.
type Verdict struct {
	Decided bool
	Needs   []Need
}

// Decider looks at the results of the rounds so far (look counts from
// 1) and says whether the answer is decided and, if not, what would
// settle it.
type Decider func(f *results.File, look int) (Verdict, error)

// RunFunc runs cases and returns every result so far, the earlier
// rounds' with them (bench.Runner.Run).
type RunFunc func(ctx context.Context, cases []bench.Case) (*results.File, error)

// Rounds runs the plan: round 1's cases, then, after each look at the
// results, more injections and trials for the comparisons that could
// still change the answer — those that fit what is left of the budget —
// until the answer is decided, the budget is spent or Looks rounds have
// run. It logs each round to log and returns the results and the last
// verdict.
func (pl *Plan) Rounds(ctx context.Context, run RunFunc, decide Decider, log io.Writer) (*results.File, Verdict, error) {
	start := time.Now()
	cases := pl.Cases
	var f *results.File
	var v Verdict
	for look := 1; ; look++ {
		fmt.Fprintf(log, "advise: round %d: %d cases, estimated %s\n", look, len(cases), seconds(Estimate(cases)))
		var err error
		f, err = run(ctx, cases)
		if err != nil {
			return f, v, err
		}
		if v, err = decide(f, look); err != nil {
			return f, v, err
		}
		if v.Decided {
			fmt.Fprintf(log, "advise: decided after round %d (%s)\n", look, seconds(time.Since(start)))
			return f, v, nil
		}
		if look >= Looks {
			fmt.Fprintf(log, "advise: %d rounds run, %d comparisons still undecided\n", look, len(v.Needs))
			return f, v, nil
		}
		left := time.Duration(0)
		if pl.Budget > 0 {
			left = pl.Budget - time.Since(start)
		}
		var dropped []Need
		cases, dropped = pl.More(f, v.Needs, left)
		for _, n := range dropped {
			fmt.Fprintf(log, "advise: out of budget for %s\n", n)
		}
		if len(cases) == 0 {
			fmt.Fprintf(log, "advise: nothing more fits the budget (%s left): %d comparisons undecided\n", seconds(left), len(v.Needs))
			return f, v, nil
		}
	}
}

// String says what n needs in words.
func (n Need) String() string {
	who := n.A
	if n.B != "" {
		who += " against " + n.B
	}
	switch {
	case n.Measure == MeasureSpeed:
		return fmt.Sprintf("%s on speed: %d more independent trials", who, n.Trials)
	default:
		return fmt.Sprintf("%s on %s under %s: %d more tested injections", who, n.Measure, n.Class, n.Injections)
	}
}

// More turns needs into the next round's cases, for the backends they
// name, continuing each combination's trials: speed needs fresh trials
// of the baseline, the others more injections of their class (split
// into cases of at most maxInjections). Within left (no cap when 0), the
// needs are taken in order and those that do not fit are returned.
func (pl *Plan) More(f *results.File, needs []Need, left time.Duration) ([]bench.Case, []Need) {
	type key struct{ spec, class string }
	want := map[key]Need{}
	var order []key
	for _, n := range needs {
		for _, spec := range []string{n.A, n.B} {
			if spec == "" {
				continue
			}
			class := n.Class
			if n.Measure == MeasureSpeed {
				class = "none"
			}
			k := key{spec, class}
			if _, ok := want[k]; !ok {
				order = append(order, k)
			}
			w := want[k]
			w.A, w.Measure, w.Class = spec, n.Measure, class
			w.Injections, w.Trials = max(w.Injections, n.Injections), max(w.Trials, n.Trials)
			want[k] = w
		}
	}
	var out []bench.Case
	var dropped []Need
	var spent time.Duration
	for _, k := range order {
		cs := pl.casesFor(f, want[k])
		cost := Estimate(cs)
		if len(cs) == 0 || (left > 0 && spent+cost > left) {
			dropped = append(dropped, want[k])
			continue
		}
		out, spent = append(out, cs...), spent+cost
	}
	return out, dropped
}

// casesFor is the cases that give n's backend what n needs.
func (pl *Plan) casesFor(f *results.File, n Need) []bench.Case {
	s := pl.suite
	s.Backends = []string{n.A}
	s.Leases = nil
	s.Only, s.Deferred = nil, nil
	if n.Measure == MeasureSpeed {
		s.Faults = nil
		s.PerfTrials = max(n.Trials, 1)
	} else {
		s.Workloads = nil
		spec := n.Class
		for _, c := range pl.Classes {
			if c.Name == n.Class {
				spec = c.Spec
			}
		}
		s.Faults = []string{spec}
		inj := max(n.Injections, 1)
		s.Injections = min(inj, maxInjections)
		s.Trials = (inj + maxInjections - 1) / maxInjections
	}
	cases, err := s.Cases()
	if err != nil {
		return nil
	}
	cases = pl.shape(cases)
	// Continue each combination's trials after the ones already run.
	next := map[string]int{}
	if f != nil {
		for _, c := range f.Cases {
			k := c.Backend + "\x00" + c.FaultClass
			next[k] = max(next[k], c.Trial+1)
		}
	}
	for i := range cases {
		cases[i].Trial += next[cases[i].Backend.Spec+"\x00"+cases[i].Fault.Class()]
	}
	return cases
}

// Screen is the plan's own look at the results, for a run without a
// decision procedure: a candidate with a lock bug in a tested injection
// (or, for correctness, a stale write its resource accepted) is out at
// once and gets nothing more; for correctness each class a qualifier
// faced needs Qualify tested injections; for efficiency each candidate
// needs Trials independent trials, and a class where one candidate
// double-granted and another did not needs Injections tested ones a
// side. It is decided when nothing more is needed.
func (pl *Plan) Screen(f *results.File, _ int) (Verdict, error) {
	guard := string(guards(pl.Profile.Token)[len(guards(pl.Profile.Token))-1])
	bug := map[string]bool{}
	buggy := map[string]map[string]bool{} // class → specs with a lock bug there
	tested := map[[2]string]int{}
	fresh := map[string]map[int]bool{}
	for _, c := range f.Cases {
		if c.IncidentsLockBug > 0 || (pl.Profile.intends(IntentCorrectness) && c.Guard == guard && c.StaleAccepted > 0) {
			bug[c.Backend] = true
			if buggy[c.FaultClass] == nil {
				buggy[c.FaultClass] = map[string]bool{}
			}
			buggy[c.FaultClass][c.Backend] = true
		}
		if c.Guard != string(guards(pl.Profile.Token)[0]) {
			continue // one count per case, not per guard
		}
		if c.FaultClass != "none" {
			n, _ := c.Tested()
			tested[[2]string{c.Backend, c.FaultClass}] += n
		} else if c.FreshServers {
			if fresh[c.Backend] == nil {
				fresh[c.Backend] = map[int]bool{}
			}
			fresh[c.Backend][c.Trial] = true
		}
	}
	var needs []Need
	faced := func(spec, class string) bool {
		_, ok := tested[[2]string{spec, class}]
		return ok
	}
	for _, cand := range pl.Candidates {
		if bug[cand.Spec] && !pl.Profile.intends(IntentEfficiency) {
			continue
		}
		for _, cl := range pl.Classes {
			if !cl.In || cl.Name == "none" || !faced(cand.Spec, cl.Name) {
				continue
			}
			got := tested[[2]string{cand.Spec, cl.Name}]
			want := 0
			if pl.Profile.intends(IntentCorrectness) && !bug[cand.Spec] {
				want = pl.Qualify
			}
			if pl.Profile.intends(IntentEfficiency) && len(buggy[cl.Name]) > 0 && len(buggy[cl.Name]) < len(pl.Candidates) {
				want = max(want, pl.Injections)
			}
			if got < want {
				m := MeasureQualify
				if want == pl.Injections && !pl.Profile.intends(IntentCorrectness) {
					m = MeasureLockBug
				}
				needs = append(needs, Need{A: cand.Spec, Measure: m, Class: cl.Name, Injections: want - got})
			}
		}
		if pl.Profile.intends(IntentEfficiency) && !bug[cand.Spec] && len(fresh[cand.Spec]) < pl.Trials {
			needs = append(needs, Need{A: cand.Spec, Measure: MeasureSpeed, Trials: pl.Trials - len(fresh[cand.Spec])})
		}
	}
	// The team's candidates first: what a round can afford goes there.
	have := map[string]bool{}
	for _, c := range pl.Candidates {
		have[c.Spec] = c.Have
	}
	slices.SortStableFunc(needs, func(a, b Need) int { return boolRank(have[a.A]) - boolRank(have[b.A]) })
	return Verdict{Decided: len(needs) == 0, Needs: needs}, nil
}
