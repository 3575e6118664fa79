package answer

import (
	"slices"

	"github.com/lockbench/lockbench/results"
)

// judgedInjections is the tested injections a class not judged yet
// needs, in all: what a first round gives a class (advise's round 1).
const judgedInjections = 3

// judgedNeeds returns, for each candidate that is not judged yet (a
// standing further evidence can change), what would judge it: each
// fault spec of its planned cases the run stopped before, and each class
// it faced without a tested injection (its cases invalid, or its
// injections tested nothing), as a need with the measure "judged". So
// the next round re-runs what is missing rather than deciding without
// it; a candidate that is out for good (a lock bug seen, a stale write
// let through) needs nothing.
func judgedNeeds(pending []standing) []results.Need {
	var out []results.Need
	add := func(b *backend, spec string) {
		if slices.ContainsFunc(out, func(n results.Need) bool { return n.A == b.name && n.Class == spec }) {
			return
		}
		out = append(out, results.Need{A: b.name, Measure: results.MeasureJudged, Class: spec, Injections: judgedInjections})
	}
	for _, s := range pending {
		if s.final || s.qualifies {
			continue
		}
		out = append(out, cutNeeds(s.b)...)
		for _, ce := range s.b.sortedClasses() {
			if ce.tested == 0 && ce.untested > 0 {
				add(s.b, ce.class)
			}
		}
	}
	return out
}

// cutNeeds returns what would judge b on the planned cases it did not
// run (left out of round 1 for the budget, or cut by the run's end): each
// of their fault specs, as a need with the measure "judged". A pick is
// not decided before they ran: a class it never faced cannot have put it
// out.
func cutNeeds(b *backend) []results.Need {
	var out []results.Need
	for _, spec := range b.cut {
		out = append(out, results.Need{A: b.name, Measure: results.MeasureJudged, Class: spec, Injections: judgedInjections})
	}
	return out
}
