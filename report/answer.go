package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/stats"
)

// answer words a choice: the recommendation in a sentence, and the
// evidence behind it a line at a time — safety with its bounds, the
// classes compared and not judged, availability, speed with its spread,
// the durability profile.
func (ds *dataset) answer(ch Choice, q question, workload string) (string, []string) {
	use := "efficiency locks (an occasional double grant is tolerable)"
	if q == forCorrectness {
		use = "correctness locks (a double grant corrupts data)"
	}
	switch {
	case !ch.Judgeable:
		s := "This run cannot recommend a lock for " + use + ": it has no " + joinAnd(ch.Missing) + "."
		if q == forCorrectness {
			s = "This run cannot recommend a lock for " + use + ": it lacks " + joinAnd(ch.Missing) + ". Rerun with those faults and fencing " +
				"before trusting any backend with correctness."
		}
		return s, nil
	case ch.Backend == "":
		if q == forEfficiency {
			return "No backend qualifies for efficiency locks: every one either counted double grants without faults, was not run with " +
				"enough clients to show them, or is the control (see the table).", nil
		}
		return "No backend qualifies for correctness locks in this run: each one had a lock-bug incident, issued no tokens, let a stale " +
			"write through with fencing on, or was not put through the faults needed (see the table).", nil
	}
	v := verdictOf(ch, ch.Backend)
	alike := append([]string{v.Backend}, ch.Alike...)
	var costlier []string
	for _, b := range ch.Tied {
		if !slices.Contains(ch.Alike, b) {
			costlier = append(costlier, b)
		}
	}
	answer := fmt.Sprintf("Use %s.", joinOr(alike))
	if q == forCorrectness {
		answer = fmt.Sprintf("Use %s, with fencing tokens checked by the resource.", joinOr(alike))
	}
	if len(alike) > 1 {
		answer += fmt.Sprintf(" The evidence does not tell them apart on safety, availability or speed, and they need as many nodes "+
			"(%d); the evidence below is %s's.", ds.nodes(v.Backend), v.Backend)
	}
	if len(costlier) > 0 {
		answer += fmt.Sprintf(" %s: indistinguishable from %s here, but costlier (%s).",
			joinAnd(costlier), v.Backend, ds.costLine(v.Backend, costlier))
	}
	if tie := safetyTie(ch); len(tie) > 0 {
		answer += fmt.Sprintf(" %s %s tied with it on safety and set apart by availability or speed, where the rank-sum test found a "+
			"difference at a %.0f%% family-wise level over this answer's %d comparisons (why: under \"Recommendation in full\").",
			joinAnd(tie), isAre(len(tie)), familyLevel*100, len(ch.sep.comparisons))
	}
	var ev []string
	if q == forEfficiency {
		t := totals(ds.find(query{Backend: v.Backend, Fault: faultNone}))
		ev = append(ev, fmt.Sprintf("Double grants without faults: %s.", perGrant(t.Incidents, t.Contended)))
	} else {
		ff := totals(ds.find(query{Backend: v.Backend, Guard: guardFenced}))
		every := totals(ds.find(query{Backend: v.Backend}))
		free := totals(ds.find(query{Backend: v.Backend, Fault: faultNone}))
		line := "Lock-bug incidents, per fault class and profile (" + ds.withOne() + "): " + boundsText(ds.classBounds(v.Backend, "",
			v.Faced, kindLockBug))
		if free.Cases > 0 {
			line += fmt.Sprintf("; without faults %s", perGrant(free.lockBugs(), free.Contended).cell())
		}
		ev = append(ev, line+".")
		ev = append(ev, fmt.Sprintf("With fencing, stale writes accepted (%s): %s; lost updates and token regressions: 0; %s stale "+
			"writes rejected; porcupine's fenced-mutex check: %s on every history.",
			ds.withOne(), boundsText(ds.classBounds(v.Backend, guardFenced, v.Faced,
				kindStale)), fmtCount(ff.StaleRejected), every.LinearizableFenced))
		if amb := withEvents(ds.classBounds(v.Backend, "", v.Faced, kindAmbiguous)); len(amb) > 0 {
			ev = append(ev, "Ambiguous incidents (inside the clock bounds of the contract line: neither a lock bug nor an expired "+
				"holder): "+boundsText(amb)+".")
		}
		ev = append(ev, "Fencing "+v.Fencing+".")
	}
	ev = append(ev, ds.comparedLine(ch, q))
	if line := ds.availabilityLine(v.Backend, ch.Compared); line != "" {
		ev = append(ev, line)
	}
	if line := rankingLine(ch); line != "" {
		ev = append(ev, line)
	}
	if line := ds.tieLine(ch, workload); line != "" {
		ev = append(ev, line)
	}
	ev = append(ev, ds.speedLine(ch, v, workload))
	if len(v.NotJudged) > 0 {
		var classes []string
		for _, nj := range v.NotJudged {
			cls, _, _ := strings.Cut(nj, " — ")
			classes = append(classes, cls)
		}
		ev = append(ev, fmt.Sprintf("Not judged for %s, so not covered: %s (why: under \"What was measured\").",
			v.Backend, joinAnd(classes)))
	}
	if prof := ds.profilesOf(v.Backend); prof != "" {
		ev = append(ev, "Durability profiles of these numbers: "+prof+".")
	}
	return answer, ev
}

// costLine says how the cost rule ordered the chosen backend and the
// tied ones that need more nodes: their node counts.
func (ds *dataset) costLine(chosen string, tied []string) string {
	byNodes := map[int][]string{}
	for _, b := range append([]string{chosen}, tied...) {
		byNodes[ds.nodes(b)] = append(byNodes[ds.nodes(b)], b)
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(byNodes)) {
		parts = append(parts, fmt.Sprintf("%s %s", joinAnd(byNodes[n]), plural(int64(n), "node")))
	}
	return "nodes: " + strings.Join(parts, ", ")
}

// comparedLine says which classes the qualifiers were compared on and
// how the choice fared there.
func (ds *dataset) comparedLine(ch Choice, q question) string {
	var qual []string
	for _, v := range ch.Verdicts {
		if v.Qualifies {
			qual = append(qual, v.Backend)
		}
	}
	if len(qual) < 2 {
		return fmt.Sprintf("The only backend that qualified; it faced %s.",
			orUnset(joinAnd(verdictOf(ch, ch.Backend).Faced), "no fault class"))
	}
	others := joinAnd(without(qual, ch.Backend))
	if len(ch.Compared) == 0 {
		return fmt.Sprintf("Compared with %s on no fault class: they faced none in common, so only speed and cost ranked them.", others)
	}
	line := fmt.Sprintf("Compared with %s on the classes all of them faced: %s.", others, joinAnd(ch.Compared))
	if q == forEfficiency {
		line += " Its double-grant incidents there, tolerated but counted (" + ds.withOne() + "): " +
			boundsText(ds.classBounds(ch.Backend, "", ch.Compared, kindIncident)) + "."
	}
	return line
}

// availabilityLine words a backend's availability under the compared
// classes.
func (ds *dataset) availabilityLine(backend string, classes []string) string {
	var parts []string
	for _, cls := range classes {
		a := ds.availabilityOf(backend, cls)
		if a.inFault.N == 0 && a.recovery.N == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s, %s",
			cls, fmtPct(a.inFault.Median), spreadSeconds(stats.Spread{N: 1, Median: a.recovery.Median})))
	}
	if len(parts) == 0 {
		return ""
	}
	return "In fault windows (grants as a share of its own baseline; recovery): " + strings.Join(parts, "; ") + "."
}

// rankingLine names the qualifying backends set apart before speed, by
// step (the reasons are in the verdict table).
func rankingLine(ch Choice) string {
	steps := map[string][]string{}
	for _, o := range ch.Verdicts {
		for _, step := range []string{"safety", "availability"} {
			if o.Qualifies && strings.HasPrefix(o.Standing, "set apart on "+step) {
				steps[step] = append(steps[step], o.Backend)
			}
		}
	}
	var parts []string
	for _, step := range []string{"safety", "availability"} {
		if len(steps[step]) > 0 {
			parts = append(parts, fmt.Sprintf("on %s %s", step, joinAnd(steps[step])))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "Qualified too, but set apart before speed: " + strings.Join(parts, "; ") + " (why: under \"Recommendation in full\")."
}

// speedLine words the choice's speed and how it compares with the
// backends that reached the speed step.
func (ds *dataset) speedLine(ch Choice, v Verdict, workload string) string {
	if v.Throughput <= 0 {
		return "Fault-free speed: not measured on the reference workload."
	}
	g := ds.peak(v.Backend, workload, v.Durability)
	if g == nil {
		return "Fault-free speed: not measured on the reference workload."
	}
	s := fmt.Sprintf("Speed: %s grants/s at %s, workload %s, %s profile; acquire p99 %s",
		spreadRate(g.Speed), plural(int64(v.Clients), "client"), workload, v.Durability, fmtUS(float64(v.P99US)))
	switch {
	case g.Speed.N < minSpeedTrials:
		s += fmt.Sprintf("; from %s, too few to call any backend faster", plural(int64(g.Speed.N), "trial"))
	case g.independentTrials() < minSpeedTrials:
		s += fmt.Sprintf("; from %s on the same servers, which count as one: no backend is called faster",
			plural(int64(g.Speed.N), "trial"))
	}
	// The others that reached the speed step, by how they compare.
	words := map[string][]string{}
	for _, o := range ch.Verdicts {
		reached := strings.HasPrefix(o.Standing, "tied") || strings.HasPrefix(o.Standing, "set apart on speed")
		if !o.Qualifies || o.Backend == v.Backend || o.Throughput <= 0 || !reached {
			continue
		}
		og := ds.peak(o.Backend, workload, o.Durability)
		if og == nil {
			continue
		}
		word := "indistinguishable here from"
		switch {
		case ch.sep == nil:
		case ch.sep.beats(stepSpeed, v.Backend, o.Backend) != nil:
			word = "faster than"
		case ch.sep.beats(stepSpeed, o.Backend, v.Backend) != nil:
			word = "slower than"
		}
		words[word] = append(words[word], fmt.Sprintf("%s %s", o.Backend, spreadRate(og.Speed)))
	}
	for _, word := range []string{"faster than", "indistinguishable here from", "slower than"} {
		if len(words[word]) > 0 {
			s += fmt.Sprintf("; %s %s", word, joinAnd(words[word]))
		}
	}
	return s + "."
}

// profilesOf lists the durability profiles of a backend's valid cases.
func (ds *dataset) profilesOf(backend string) string {
	var ps []string
	for _, d := range ds.Durabilities {
		if n := len(ds.find(query{Backend: backend, Durability: d})); n > 0 {
			ps = append(ps, fmt.Sprintf("%s (%s)", d, plural(int64(n), "combination")))
		}
	}
	return joinAnd(ps)
}

// safetyTie returns the qualifying backends the choice was put before
// only by availability or speed: tied with it on safety, and ordered by
// numbers that move from run to run.
func safetyTie(ch Choice) []string {
	var out []string
	for _, o := range ch.Verdicts {
		if o.Qualifies && o.Backend != ch.Backend &&
			(strings.HasPrefix(o.Standing, "set apart on availability") || strings.HasPrefix(o.Standing, "set apart on speed")) {
			out = append(out, o.Backend)
		}
	}
	return out
}

// tieLine says, when the choice is tied with other qualifiers or put
// before them by availability or speed, what the test would need to set
// them apart: the samples a side with which a complete separation would
// reach the level of this answer's family, against those the run has.
// Fewer can never do it, whatever the numbers.
func (ds *dataset) tieLine(ch Choice, workload string) string {
	others := append(slices.Clone(ch.Tied), safetyTie(ch)...)
	if len(others) == 0 || ch.sep == nil {
		return ""
	}
	need := ch.sep.settle()
	have := "no fault window"
	if ch.sep.maxWindow > 0 {
		have = fmt.Sprintf("%d–%d fault windows per class and backend", ch.sep.minWindow, ch.sep.maxWindow)
		if ch.sep.minWindow == ch.sep.maxWindow {
			have = fmt.Sprintf("%d fault windows per class and backend", ch.sep.minWindow)
		}
	}
	trials := "its speed trials share servers, so each backend's count as one"
	if g := ds.peak(ch.Backend, workload, verdictOf(ch, ch.Backend).Durability); g != nil && g.Independent {
		trials = fmt.Sprintf("%s's speed comes from %s on fresh servers", ch.Backend, plural(int64(g.Speed.N), "trial"))
	}
	more := ""
	if ch.sep.minWindow > 0 && need > ch.sep.minWindow {
		more = fmt.Sprintf(" (%d more than the fewest here)", need-ch.sep.minWindow)
	}
	return fmt.Sprintf("What would settle the order between %s and %s: the rank-sum test sets two backends apart at this answer's %.0f%% "+
		"level over its %d comparisons with samples (those still standing held to p ≤ %s by Tarone's correction applied "+
		"step-down, K = %d) only with at "+
		"least %d samples a side, "+
		"and then only when they separate; this run has %s and %s. %d tested injections per class and backend%s, and %d trials each on fresh "+
		"servers, would let a clear difference show.",
		ch.Backend, joinAnd(others), familyLevel*100, ch.sep.sized, fmtP(ch.sep.level), ch.sep.k, need, have, trials, need, more, need)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// without returns s without v.
func without(s []string, v string) []string {
	return slices.DeleteFunc(slices.Clone(s), func(x string) bool { return x == v })
}
