package answer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// noneQualifies says why no candidate qualifies, which ones further
// evidence could still qualify — those on the servers the team runs
// first — and, of those it would add, the nearest: the one whose
// judging needs (needs) the fewest classes.
func noneQualifies(cands []*backend, pending []standing, needs []results.Need, p results.Profile, intent string) []string {
	if len(cands) == 0 {
		return []string{"No candidate: the run holds no backend the profile asks about (controls never qualify)."}
	}
	out := []string{fmt.Sprintf("No candidate qualifies for %s locks: each one is out, or not judged yet, for the reason listed under "+
		"unqualified.", intent)}
	var yours, added []standing
	for _, s := range pending {
		if owned(s.b, p.Have) == 1 {
			yours = append(yours, s)
		} else {
			added = append(added, s)
		}
	}
	if len(yours) > 0 {
		var names []string
		for _, s := range yours {
			names = append(names, s.b.name)
		}
		out = append(out, fmt.Sprintf("Not judged yet, so more evidence could still qualify them: %s.", strings.Join(names, ", ")))
	}
	if len(added) > 0 {
		classes := func(s standing) int {
			n := 0
			for _, x := range needs {
				if x.A == s.b.name {
					n++
				}
			}
			return n
		}
		near := slices.MinFunc(added, func(a, b standing) int { return classes(a) - classes(b) })
		out = append(out, fmt.Sprintf("Of the candidates you would add, the nearest is %s, on %s: %s.", near.b.name,
			orWord(near.b.kind, "servers of its own"), near.reason))
	}
	return out
}

// reasons words the choice, the sentence that matters first.
func reasons(ch *results.Choice, pick *backend, left []*backend, seps []separation, fam *family,
	p results.Profile, intent string, qualified int) []string {
	var out []string
	use := "Use " + pick.name
	if intent == results.IntentCorrectness && guardFor(p.Token) != guardNone {
		use += ", with fencing tokens checked by the resource"
	}
	switch {
	case len(left) == 1 && len(pick.cut) > 0:
		out = append(out, fmt.Sprintf("%s, provisionally: it was not run under its planned cases under %s (left out for the budget, "+
			"or the run stopped before them), which could still put it out; a round that runs them would decide.",
			use, strings.Join(pick.cut, ", ")))
	case qualified == 1:
		out = append(out, use+": the only candidate that qualifies.")
	case ch.Decided:
		out = append(out, fmt.Sprintf("%s: set apart from every other qualifier at a %.0f%% family-wise level over this run's looks.",
			use, Alpha*100))
	default:
		var names []string
		for _, b := range left {
			names = append(names, b.name)
		}
		s := fmt.Sprintf("%s are tied: the evidence does not tell them apart at a %.0f%% family-wise level", joinAnd(names), Alpha*100)
		if len(ch.Needs) > 0 {
			s += "; " + settleWords(ch.Needs[0], pick) + estimate(ch.Needs[0], left)
		}
		out = append(out, s+". Until then "+pick.name+" comes first ("+tieBreak(left, p.Have)+").")
	}
	if len(p.Have) > 0 && !slices.Contains(p.Have, pick.kind) {
		s := fmt.Sprintf("None of the candidates on the servers you run (%s) qualifies; the nearest, %s, runs on %s: you would add it.",
			joinAnd(p.Have), pick.name, orWord(pick.kind, "servers of its own"))
		out = append(out, s)
	}
	for _, s := range seps {
		out = append(out, sepWords(s, fam))
	}
	for _, b := range left[1:] {
		out = append(out, comparedWords(pick, b))
	}
	if w := expiredWords(pick); w != "" {
		out = append(out, w)
	}
	out = append(out, speedWords(pick))
	return out
}

// settleWords is "12 more tested injections of restart a side would settle it (≈ 4 min)".
func settleWords(n results.Need, pick *backend) string {
	switch {
	case n.Trials > 0:
		have := min(len(pick.speeds), 1)
		if pick.independent {
			have = len(pick.speeds)
		}
		return fmt.Sprintf("%d independent trials a side on fresh servers (it has %d) would settle %s against %s on speed "+
			"if they differ by %.0f%%",
			n.Trials, have, n.A, n.B, (speedMargin-1)*100)
	case n.Measure == results.MeasureJudged:
		return fmt.Sprintf("%s is not judged yet: %d tested injections of %s would judge it", n.A, n.Injections, n.Class)
	case n.Measure == results.MeasureLockBugs:
		return fmt.Sprintf("%d tested injections of %s a side would settle %s against %s on lock bugs if their rates differ by %.0f points",
			n.Injections, n.Class, n.A, n.B, lockBugMargin*100)
	}
	return fmt.Sprintf("%d tested injections of %s a side would settle %s against %s on availability", n.Injections, n.Class, n.A, n.B)
}

// tieBreak says why the first of a tie comes first.
func tieBreak(left []*backend, have []string) string {
	a, b := left[0], left[1]
	switch {
	case owned(a, have) > owned(b, have):
		return "you run its servers"
	case a.median() > b.median():
		return fmt.Sprintf("its median speed is higher, %s against %s grants/s, a difference the test could not confirm",
			rate(a.median()), rate(b.median()))
	case a.nodes < b.nodes:
		return fmt.Sprintf("it needs fewer nodes, %d against %d", a.nodes, b.nodes)
	}
	return "by name: nothing measured puts one first"
}

// sepWords words one separation.
func sepWords(s separation, fam *family) string {
	h := s.by
	test := fmt.Sprintf("p = %s, held to %s, step-down over the family's %d counted comparisons", fmtP(h.test.P), fmtP(h.level), fam.counted)
	switch h.measure {
	case results.MeasureLockBugs:
		x, y := classByLabel(h.worse, h.class), classByLabel(h.better, h.class)
		return fmt.Sprintf("%s set apart by %s on lock bugs under %s: a lock bug after %s, against %s (Fisher's exact test, %s).",
			h.worse.name, h.better.name, h.class, boundWords(x.bugRate(), "tested injection"), boundWords(y.bugRate(), "tested injection"), test)
	case results.MeasureAvailability:
		what := fmt.Sprintf("its in-fault grants lie below %s's by more than %.0f points of its baseline", h.better.name, shareMargin*100)
		if h.sub == "recovery" {
			what = fmt.Sprintf("its recovery lies above %s's by more than %.0f s", h.better.name, recoveryMargin)
		}
		x, y := classByLabel(h.worse, h.class), classByLabel(h.better, h.class)
		return fmt.Sprintf("%s set apart on availability under %s: %s — it served %s of its baseline and recovered in %s, "+
			"%s %s and %s (rank-sum test, %s).", h.worse.name, h.class, what, medianPct(x.share), medianSeconds(x.recovery),
			h.better.name, medianPct(y.share), medianSeconds(y.recovery), test)
	}
	return fmt.Sprintf("%s set apart on speed: %s against %s's %s grants/s, from %d and %d independent trials "+
		"(Welch's t on log throughput, %s).",
		h.worse.name, spread(h.worse.speeds), h.better.name, spread(h.better.speeds), len(h.worse.speeds), len(h.better.speeds), test)
}

// comparedWords says on which classes two tied candidates were compared,
// and which only one of them faced.
func comparedWords(a, b *backend) string {
	common := commonClasses(a, b)
	var both, onlyA, onlyB []string
	for _, k := range common {
		both = append(both, a.classes[k].label())
	}
	for k, ce := range a.classes {
		if !slices.Contains(common, k) && ce.tested > 0 {
			onlyA = append(onlyA, ce.label())
		}
	}
	for k, ce := range b.classes {
		if !slices.Contains(common, k) && ce.tested > 0 {
			onlyB = append(onlyB, ce.label())
		}
	}
	slices.Sort(onlyA)
	slices.Sort(onlyB)
	s := fmt.Sprintf("%s and %s compared on the classes both faced: %s", a.name, b.name, orWord(joinAnd(both), "none"))
	if len(onlyA) > 0 {
		s += fmt.Sprintf("; only %s faced %s", a.name, joinAnd(onlyA))
	}
	if len(onlyB) > 0 {
		s += fmt.Sprintf("; only %s faced %s", b.name, joinAnd(onlyB))
	}
	return s + "."
}

// expiredWords reports the pick's expired holders: the lease working,
// not ranked.
func expiredWords(b *backend) string {
	var parts []string
	for _, ce := range b.sortedClasses() {
		if ce.expired > 0 {
			parts = append(parts, fmt.Sprintf("under %s after %d of %d tested injections", ce.label(), ce.expired, ce.tested))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("Expired holders of %s (a holder went on after its lease ended: the lease working, which a fencing token "+
		"stops; reported, not ranked): %s.",
		b.name, strings.Join(parts, "; "))
}

// speedWords words the pick's speed and whether it could be compared.
func speedWords(b *backend) string {
	switch {
	case len(b.speeds) == 0:
		return fmt.Sprintf("Speed of %s: not measured without faults on the reference workload.", b.name)
	case !b.independent:
		return fmt.Sprintf("Speed of %s: %s grants/s at %d clients from %d trials on the same servers, which count as one: not compared.",
			b.name, spread(b.speeds), b.peakClients, len(b.speeds))
	}
	return fmt.Sprintf("Speed of %s: %s grants/s at %d clients from %d independent trials on fresh servers.",
		b.name, spread(b.speeds), b.peakClients, len(b.speeds))
}

// bounds are the pick's upper bounds in words, per class.
func bounds(b *backend, intent string) []string {
	what := "double grant"
	if intent == results.IntentCorrectness {
		what = "lock bug"
	}
	var out []string
	for _, ce := range b.sortedClasses() {
		if ce.tested == 0 {
			continue
		}
		r := ce.bugRate()
		if r.K == 0 {
			out = append(out, fmt.Sprintf("no %s in %d %s: at most %s at 95%%", what, r.N, plural(r.N, ce.label()+" injection"), pct(r.Upper95())))
		} else {
			out = append(out, fmt.Sprintf("a %s after %d of %d %s: at most %s at 95%%",
				what, r.K, r.N, plural(r.N, ce.label()+" injection"), pct(r.Upper95())))
		}
	}
	if f := b.free; f.contended > 0 {
		out = append(out, fmt.Sprintf("without faults %d %ss in %d contended grants: at most %s at 95%%",
			f.lockBugs, what, f.contended, pct(stats.Rate{K: f.lockBugs, N: f.contended}.Upper95())))
	}
	return out
}

// notTested names the classes of the run the pick has no tested
// injection of, and what the run skipped for it, each with why.
func notTested(ev *evidence, b *backend) []string {
	var out []string
	for _, cls := range ev.classes {
		tested, untested := int64(0), int64(0)
		var why []string
		for _, ce := range b.classes {
			if ce.class == cls {
				tested += ce.tested
				untested += ce.untested
				for _, w := range ce.why {
					why = appendNew(why, w)
				}
			}
		}
		switch {
		case tested > 0:
		case untested > 0:
			out = append(out, fmt.Sprintf("%s: %d injections, none tested (%s)", cls, untested, strings.Join(why, "; ")))
		case !skipped(ev, b.name, cls):
			out = append(out, cls+": not run against it")
		}
	}
	for _, s := range ev.skipped {
		if s.Backend == b.name {
			out = append(out, s.FaultClass+": "+firstLine(s.Reason))
		}
	}
	return out
}

// firstLine is a skip's reason without what follows its first line: a
// server that failed to start appends its log, which the report's table
// of skips shows and the answer's sentence must not.
func firstLine(reason string) string {
	line, _, cut := strings.Cut(reason, "\n")
	if cut {
		return strings.TrimRight(line, " :;") + " (the log is in the report's skipped cases)"
	}
	return reason
}

func skipped(ev *evidence, backend, cls string) bool {
	return slices.ContainsFunc(ev.skipped, func(s results.Skip) bool { return s.Backend == backend && s.FaultClass == cls })
}

// classByLabel returns the backend's class evidence with label l.
func classByLabel(b *backend, l string) *classEvidence {
	for _, ce := range b.classes {
		if ce.label() == l {
			return ce
		}
	}
	return &classEvidence{}
}

// spread is "4.4k (4.1k–4.6k)".
func spread(xs []float64) string {
	s := stats.SpreadOf(xs)
	if s.N <= 1 || s.Min == s.Max {
		return rate(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", rate(s.Median), rate(s.Min), rate(s.Max))
}

// rate is a grants/s figure in 3 significant digits: 730, 4.41k.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

// fmtP is a p-value in 2 significant digits.
func fmtP(p float64) string {
	if p >= 1e-4 {
		return fmt.Sprintf("%.2g", p)
	}
	return fmt.Sprintf("%.1e", p)
}

// joinAnd is "a, b and c".
func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// orWord is s, or alt when s is empty.
func orWord(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// medianPct is the median of shares as a percentage, "not measured"
// without any.
func medianPct(xs []float64) string {
	if len(xs) == 0 {
		return "not measured"
	}
	return pct(stats.SpreadOf(xs).Median)
}

// medianSeconds is the median of recoveries, "never" when it is
// infinite.
func medianSeconds(xs []float64) string {
	switch m := stats.SpreadOf(xs).Median; {
	case len(xs) == 0:
		return "not measured"
	case math.IsInf(m, 1):
		return "never (median)"
	default:
		return fmt.Sprintf("%.1f s (median)", m)
	}
}

// estimate is the running time the need asks for, from how long the run's
// own cases took: " (≈ 12 min of running, server starts aside)", or ""
// when the run says nothing of it.
func estimate(n results.Need, left []*backend) string {
	secs := 0.0
	for _, b := range left {
		if b.name != n.A && b.name != n.B {
			continue
		}
		switch {
		case n.Trials > 0 && b.free.cases > 0:
			have := min(len(b.speeds), 1)
			if b.independent {
				have = len(b.speeds)
			}
			secs += float64(max(n.Trials-have, 0)) * b.free.seconds / float64(b.free.cases)
		case n.Injections > 0:
			ce := classByLabel(b, n.Class)
			if ce.tested > 0 {
				secs += float64(max(int64(n.Injections)-ce.tested, 0)) * ce.seconds / float64(ce.tested)
			}
		}
	}
	if secs <= 0 {
		return ""
	}
	return fmt.Sprintf(" (≈ %.0f min of running, server starts aside)", max(secs/60, 1))
}
