package advise

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/lockbench/lockbench/answer"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// Verdict is what one look at the results says: the answer is decided,
// or these comparisons could still change it, each with the tested
// injections or independent trials a side it needs in all.
type Verdict struct {
	Decided bool
	Needs   []results.Need
}

// Decider looks at the results of the rounds so far and says whether
// the answer is decided and, if not, what would settle it.
type Decider func(f *results.File) (Verdict, error)

// Decide is the Decider of the decision procedure (answer.Decide) for
// profile p: it records the answer in f (f.Answer, which the next look
// reads to spend its share of alpha) with the profile, and the answer is
// decided when every intent's is.
func Decide(p results.Profile) Decider {
	return func(f *results.File) (Verdict, error) {
		// A candidate is in the answer once measured, or planned and cut
		// (not judged); one the suite never planned here is not.
		q := p
		if len(p.Backends) > 0 {
			measured := map[string]bool{}
			for _, c := range f.Cases {
				measured[c.Backend] = true
			}
			for _, s := range f.Skipped {
				measured[s.Backend] = measured[s.Backend] || s.Cut
			}
			q.Backends = nil
			for _, b := range p.Backends {
				if measured[b] {
					q.Backends = append(q.Backends, b)
				}
			}
		}
		a, err := answer.Decide(f, q)
		if err != nil {
			return Verdict{}, err
		}
		f.Answer, f.Profile = &a, &q
		v := Verdict{Decided: true}
		for _, ch := range []*results.Choice{a.Correctness, a.Efficiency} {
			if ch == nil {
				continue
			}
			v.Decided = v.Decided && ch.Decided
			v.Needs = append(v.Needs, ch.Needs...)
		}
		return v, nil
	}
}

// RunFunc runs cases and returns every result so far, the earlier
// rounds' with them (bench.Runner.Run); it starts no case after startBy,
// when set, and records those left as cut (bench.Runner.StartBy).
type RunFunc func(ctx context.Context, cases []bench.Case, startBy time.Time) (*results.File, error)

// Rounds runs the plan: round 1's cases, then, after each look at the
// results, more injections and trials for the comparisons that could
// still change the answer — those that fit what is left of the budget —
// until the answer is decided, the budget is spent or Looks rounds have
// run. The budget covers the whole command: the rounds end Closing
// before it, a hard cap at which a round still running is cut short (its
// results so far kept, the file marked partial) and the last look is on
// what was measured. It logs each round to log and returns the results
// and the last verdict.
func (pl *Plan) Rounds(ctx context.Context, run RunFunc, decide Decider, log io.Writer) (*results.File, Verdict, error) {
	start := time.Now()
	parent := ctx
	limit := forRounds(pl.Budget)
	if pl.Budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	cases := pl.Cases
	var f *results.File
	var v Verdict
	for look := 1; ; look++ {
		fmt.Fprintf(log, "advise: round %d: %d cases, estimated %s\n", look, len(cases), seconds(Estimate(cases)))
		var startBy time.Time
		if look == 1 && pl.RoundOne > 0 {
			startBy = start.Add(pl.RoundOne)
		}
		var err error
		f, err = run(ctx, cases, startBy)
		spent := err != nil && parent.Err() == nil && ctx.Err() != nil
		if err != nil && !spent {
			return f, v, err
		}
		if f == nil {
			return f, v, err
		}
		if v, err = decide(f); err != nil {
			return f, v, err
		}
		if spent {
			fmt.Fprintf(log, "advise: the budget (%s) ran out during round %d: its cases not run are not in the answer\n", seconds(pl.Budget), look)
			return f, v, nil
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
			if left = limit - time.Since(start); left <= 0 {
				fmt.Fprintf(log, "advise: the budget is spent after round %d: %d comparisons undecided\n", look, len(v.Needs))
				return f, v, nil
			}
		}
		var dropped []results.Need
		cases, dropped = pl.More(f, v.Needs, left)
		for _, n := range dropped {
			fmt.Fprintf(log, "advise: out of budget for %s\n", Words(n))
		}
		if len(cases) == 0 {
			fmt.Fprintf(log, "advise: nothing more fits the budget (%s left): %d comparisons undecided\n", seconds(left), len(v.Needs))
			return f, v, nil
		}
	}
}

// Closing is the part of a budget kept for after the rounds: stopping
// the servers of a cut round, the last look, results.json and the
// report; a tenth of budgets under 200 s.
func Closing(budget time.Duration) time.Duration {
	return min(20*time.Second, budget/10)
}

// forRounds is what a budget leaves the rounds: all of it but Closing.
func forRounds(budget time.Duration) time.Duration { return budget - Closing(budget) }

// Words says what n needs in words.
func Words(n results.Need) string {
	who := n.A
	if n.B != "" {
		who += " against " + n.B
	}
	switch n.Measure {
	case results.MeasureSpeed:
		return fmt.Sprintf("%s on speed: %d independent trials a side", who, n.Trials)
	case results.MeasureJudged:
		return fmt.Sprintf("%s, not judged yet: %d tested injections of %s", who, n.Injections, n.Class)
	}
	return fmt.Sprintf("%s on %s under %s: %d tested injections a side", who, n.Measure, n.Class, n.Injections)
}

// More turns needs into the next round's cases, for the backends they
// name, continuing each combination's trials: speed needs fresh trials
// of the baseline, the others injections of their class (split into
// cases of at most maxInjections), each up to what the need asks in all
// less what f has. Within left (no cap when 0), the needs are taken in
// order and those that do not fit are returned.
func (pl *Plan) More(f *results.File, needs []results.Need, left time.Duration) ([]bench.Case, []results.Need) {
	// What would judge a candidate comes first, class by class in the
	// plan's order (the candidates in the answer's within a class): a
	// not-judged candidate keeps the answer undecided, and a short round
	// spends itself on the classes that put locks out.
	needs = slices.Clone(needs)
	slices.SortStableFunc(needs, func(a, b results.Need) int {
		rank := func(n results.Need) int {
			if n.Measure != results.MeasureJudged {
				return math.MaxInt
			}
			return pl.classRank(classOf(n.Class))
		}
		return cmp.Compare(rank(a), rank(b))
	})
	type key struct{ spec, class string }
	want := map[key]results.Need{}
	var order []key
	for _, n := range needs {
		for _, spec := range []string{n.A, n.B} {
			if spec == "" {
				continue
			}
			class := classOf(n.Class)
			switch n.Measure {
			case results.MeasureSpeed:
				class = "none"
			case results.MeasureJudged:
				class = n.Class // the fault spec as planned, its params with it
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
	var dropped []results.Need
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

// casesFor is the cases that give n's backend what n needs beyond what
// f has.
func (pl *Plan) casesFor(f *results.File, n results.Need) []bench.Case {
	s := pl.suite
	s.Leases = nil
	have := haveOf(f, n.A, n.Class)
	if n.Measure == results.MeasureSpeed {
		if n.Trials <= have.trials {
			return nil
		}
		s.Rules = rules([]string{n.A}, []string{suites.Sweep})
		s.PerfTrials = n.Trials - have.trials
		// Only the workload the answer compares speed on, and its client
		// counts up to the one compared, in the sweep's order: the cases
		// before it are what warmed the servers in round 1's trials, and
		// a case alone on servers started for it measures a colder
		// server, by a different amount for each backend
		// (docs/measurements.md, run a33b51bf).
		if w, clients, ok := answer.SpeedPoint(f, n.A); ok {
			s.Workloads, s.HotTrials = []workloads.Workload{workloads.Workload(w)}, 0
			s.ManyKeysClients = upTo(s.ManyKeysClients, clients)
			s.Clients = upTo(s.Clients, clients)
		}
	} else {
		if n.Measure == results.MeasureJudged {
			have.tested = 0 // what it has did not judge it: n's injections again
		}
		if n.Injections <= have.tested {
			return nil
		}
		s.Workloads = nil
		spec := n.Class
		for _, c := range pl.Classes {
			if c.Name == n.Class {
				spec = c.Spec
			}
		}
		s.Rules = rules([]string{n.A}, []string{spec})
		inj := n.Injections - have.tested
		s.Injections = min(inj, maxInjections)
		s.Trials = (inj + maxInjections - 1) / maxInjections
	}
	plan, err := s.Plan()
	if err != nil {
		return nil
	}
	cases := pl.shape(plan.Cases)
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

// classOf is the fault class of a need's class label, which may carry a
// durability profile ("power-loss|durable", "power-loss (durable)").
func classOf(label string) string {
	for i, r := range label {
		if r == '|' || r == ' ' || r == '(' || r == '?' {
			return label[:i]
		}
	}
	return label
}

// held is what f holds of a backend: its fresh trials without faults,
// and its tested injections of a class.
type held struct{ trials, tested int }

func haveOf(f *results.File, spec, label string) held {
	var h held
	if f == nil {
		return h
	}
	class := classOf(label)
	trials := map[int]bool{}
	seen := map[string]bool{}
	for _, c := range f.Cases {
		if c.Backend != spec {
			continue
		}
		if c.FaultClass == "none" && c.FreshServers {
			trials[c.Trial] = true
		}
		// One count per case, not per guard it was judged under.
		if id := c.History + "/" + c.Fault + "/" + fmt.Sprint(c.Trial, c.Seed); c.FaultClass == class && !seen[id] {
			seen[id] = true
			n, _ := c.Tested()
			h.tested += n
		}
	}
	h.trials = len(trials)
	return h
}

// upTo returns the counts of a sweep up to and including clients, in
// order; just clients when the sweep does not reach it.
func upTo(sweep []int, clients int) []int {
	var out []int
	for _, n := range sweep {
		out = append(out, n)
		if n == clients {
			return out
		}
	}
	return []int{clients}
}
