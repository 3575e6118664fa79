package advise

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/results"
)

// The order in which a budget keeps classes: for correctness, the ones
// that break exclusion first (a lost or expired lock, a lost write, a
// clock that expires keys early); for efficiency, what costs grants.
var (
	priorityCorrectness = []string{"none", "client-pause", "client-clock", "restart", "power-loss", "clock-jump", "failover",
		"crash-minority", "partition", "server-pause", "leader-kill", "partition-leader", "partition-halves", "latency"}
	priorityEfficiency = []string{"none", "server-pause", "restart", "crash-minority", "partition", "client-pause", "failover"}
)

// cell is the cases of one backend under one class.
type cell struct {
	spec, class string
	cases       []bench.Case
	cost        time.Duration
}

// fit orders the cells (a backend's cases under one class) by what the
// answer needs first — the candidates the team runs before those it
// would add, the classes in the order of the plan's (the baseline, then
// what breaks exclusion for correctness, what costs grants for
// efficiency) — and keeps those that fit the budget (the whole of it for
// round 1 when the budget covers everything, else three quarters, the
// rest left to the rounds); it returns what it cut, in words and as cases
// cut for the results (leftOut).
func (pl *Plan) fit(cases []bench.Case) ([]bench.Case, []string, []results.Skip) {
	if pl.Budget == 0 {
		return cases, nil, nil
	}
	rounds := forRounds(pl.Budget)
	limit := rounds * 3 / 4
	switch {
	case Estimate(cases) <= rounds*9/10:
		limit = math.MaxInt64 // everything, still in priority order
	case pl.Profile.isDefault():
		limit = rounds // make bench: the whole catalogue first, rounds only if time is left
	}
	byKey := map[[2]string]*cell{}
	var cells []*cell
	for _, c := range cases {
		k := [2]string{c.Backend.Spec, c.Fault.Class()}
		if byKey[k] == nil {
			byKey[k] = &cell{spec: k[0], class: k[1]}
			cells = append(cells, byKey[k])
		}
		byKey[k].cases = append(byKey[k].cases, c)
	}
	have := map[string]bool{}
	for _, c := range pl.Candidates {
		have[c.Spec] = c.Have
	}
	rank := func(c *cell) int {
		if b, err := bench.ParseBackend(c.spec); err == nil && b.Descriptor.Control {
			return -1 // the control proves the checkers see a double grant: first
		}
		return boolRank(have[c.spec])
	}
	ranked := slices.Clone(cells)
	slices.SortStableFunc(ranked, func(a, b *cell) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return pl.classRank(a.class) - pl.classRank(b.class)
	})
	keep := map[*cell]bool{}
	var kept []bench.Case
	var cut []string
	full := false // past the first cell that does not fit, nothing more is kept: priority, not packing
	for _, c := range ranked {
		c.cost = Estimate(c.cases)
		// What the cells kept so far and this one take in the order they
		// run: their servers' starts shared, not one per cell.
		if with := append(slices.Clone(kept), c.cases...); !full && Estimate(with) <= limit {
			keep[c], kept = true, with
			continue
		}
		full = true
		cut = append(cut, fmt.Sprintf("%s under %s (≈%s)", c.spec, c.class, seconds(c.cost)))
	}
	// The cases run in that order too: if the budget's hard cap still
	// ends the round early (an estimate is an estimate), it cuts the
	// class that matters least, the same for every candidate as far as
	// it can, not whatever came last in the suite's order.
	var out []bench.Case
	for _, c := range ranked {
		if keep[c] {
			out = append(out, c.cases...)
		}
	}
	return out, cut, leftOut(ranked, keep)
}

// classRank is where class comes in the order the plan spends its
// budget on classes: the baseline, then what breaks exclusion for
// correctness, what costs grants for efficiency, then the plan's other
// classes in its order.
func (pl *Plan) classRank(class string) int {
	order := priorityEfficiency
	if pl.Profile.intends(IntentCorrectness) {
		order = priorityCorrectness
	}
	if j := slices.Index(order, class); j >= 0 {
		return j
	}
	for i, c := range pl.Classes {
		if c.Name == class {
			return len(order) + i
		}
	}
	return len(order) + len(pl.Classes)
}

// leftOut records the cells round 1 leaves out for the budget as cases
// cut (results.Skip.Cut), once per backend and fault spec: they apply and
// were planned, so what they would show is unknown, and the answer does
// not judge a candidate without them — its rounds run them when the
// candidate could still qualify.
func leftOut(cells []*cell, keep map[*cell]bool) []results.Skip {
	var out []results.Skip
	for _, c := range cells {
		if keep[c] {
			continue
		}
		for _, k := range c.cases {
			if slices.ContainsFunc(out, func(s results.Skip) bool { return s.Backend == k.Backend.Spec && s.Fault == k.Fault.Spec }) {
				continue
			}
			out = append(out, results.Skip{Backend: k.Backend.Spec, FaultClass: k.Fault.Class(), Fault: k.Fault.Spec, Cut: true,
				ServerKind: string(k.Backend.Descriptor.Servers.Kind),
				Reason: fmt.Sprintf("not run in round 1: left out for the budget (≈%s); a later round runs it if the answer needs it",
					seconds(c.cost))})
		}
	}
	return out
}

// whole estimates what deciding every comparison would take: round 1,
// and for each candidate and class in, the injections up to the
// qualification's (correctness) or the separation's (efficiency).
func (pl *Plan) whole(cases []bench.Case) time.Duration {
	d := Estimate(cases)
	want := 0
	if pl.Profile.intends(IntentCorrectness) {
		want = pl.Qualify
	}
	if pl.Profile.intends(IntentEfficiency) {
		want = max(want, pl.Injections)
	}
	for _, c := range cases {
		if c.Fault.Name == "none" || c.Injections == 0 || want <= c.Injections {
			continue
		}
		more := c
		more.Injections = want - c.Injections
		d += Estimate([]bench.Case{more})
	}
	return d
}

// Costs of a case beyond its load, fitted to make bench's runs on 2
// cores (14 min 5 s for 11 min 46 s of planned load): its workers and
// judge, and a start of its servers (startCost) when it needs others.
const caseOverhead = 500 * time.Millisecond

// startCost is how long starting backend b's servers takes here (its
// kind's StartCost).
func startCost(b bench.Backend) time.Duration {
	s := b.Descriptor.Servers
	k, err := kinds.Lookup(s.Kind)
	if err != nil || k.StartCost == nil {
		return 0 // no servers, or servers lockbench does not start
	}
	return k.StartCost(s.Count)
}

// Estimate is how long cases take to run here, in order: each case's
// load as it will run (stretched to fit its injections), its overhead,
// and a start of servers whenever a case needs its backend's servers
// otherwise than the last case on them (another durability profile, a
// lazy filesystem, the clock preload, network namespaces), a fresh trial
// or a fault that spends its cluster.
func Estimate(cases []bench.Case) time.Duration {
	var d time.Duration
	last := map[backends.Servers]string{}
	for _, c := range cases {
		ttl := max(c.Spec.TTL, c.Fault.MinTTL)
		run := max(c.Spec.Duration, c.Fault.MinDuration(bench.Shape(c.Backend), bench.Lease(c.Backend, ttl), c.Injections))
		d += run + caseOverhead
		servers := c.Backend.Descriptor.Servers
		key := fmt.Sprintf("%v/%s", c.Fault.Needs, c.Durability)
		if c.Fresh {
			key = fmt.Sprintf("%s/%d", c.Backend.Spec, c.Trial)
		}
		if old, ok := last[servers]; !ok || old != key || c.Fault.Fresh {
			d += startCost(c.Backend)
			last[servers] = key
		}
	}
	return d
}

// seconds writes d rounded to the second.
func seconds(d time.Duration) string { return d.Round(time.Second).String() }
