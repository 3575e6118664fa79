package report

import (
	"fmt"
	"slices"
	"strings"
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
			s = "This run cannot recommend a lock for " + use + ": it lacks " + joinAnd(ch.Missing) + ". Rerun with those faults and fencing before trusting any backend with correctness."
		}
		return s, nil
	case ch.Backend == "":
		if q == forEfficiency {
			return "No backend qualifies for efficiency locks: every one either counted double grants without faults, was not run with enough clients to show them, or is the control (see the table).", nil
		}
		return "No backend qualifies for correctness locks in this run: each one had a lock-bug incident, issued no tokens, let a stale write through with fencing on, or was not put through the faults needed (see the table).", nil
	}
	v := verdictOf(ch, ch.Backend)
	answer := fmt.Sprintf("Use %s for %s.", v.Backend, use)
	if q == forCorrectness {
		answer = fmt.Sprintf("Use %s for %s, with its fencing tokens checked by the resource.", v.Backend, use)
	}
	if len(ch.Tied) > 0 {
		answer += fmt.Sprintf(" %s: indistinguishable from it here; the tie went to cost (%s).", joinAnd(ch.Tied), costWord(ds, v.Backend, ch.Tied[0]))
	}
	var ev []string
	if q == forEfficiency {
		t := totals(ds.find(query{Backend: v.Backend, Fault: faultNone}))
		ev = append(ev, fmt.Sprintf("Double-grant incidents without faults: %s.", perGrant(t.Incidents, t.Acquired)))
	} else {
		all := ds.evidenceOn(v.Backend, v.Faced)
		fenced := ds.evidenceUnder(v.Backend, v.Faced, guardFence)
		ff := totals(ds.find(query{Backend: v.Backend, Guard: guardFence}))
		free := totals(ds.find(query{Backend: v.Backend, Fault: faultNone}))
		ev = append(ev, fmt.Sprintf("Lock-bug incidents: %s over %s (%s); without faults %s.",
			perInjection(0, all.tally), plural(int64(len(v.Faced)), "fault class"), joinAnd(v.Faced), perGrant(free.lockBugs(), free.Acquired)))
		ev = append(ev, fmt.Sprintf("Stale writes accepted with fencing: %s; %s rejected; lost updates and token regressions: 0; porcupine fenced-mutex check: %s.",
			perInjection(fenced.StaleAccepted, fenced.tally), fmtCount(ff.StaleRejected), ff.LinearizableFenced))
		ev = append(ev, "Fencing "+v.Fencing+".")
	}
	ev = append(ev, ds.comparedLine(ch, q))
	if line := ds.availabilityLine(v.Backend, ch.Compared); line != "" {
		ev = append(ev, line)
	}
	if line := rankingLine(ch); line != "" {
		ev = append(ev, line)
	}
	ev = append(ev, ds.speedLine(ch, v, workload))
	if len(v.NotJudged) > 0 {
		var classes []string
		for _, nj := range v.NotJudged {
			cls, _, _ := strings.Cut(nj, " — ")
			classes = append(classes, cls)
		}
		ev = append(ev, fmt.Sprintf("Not judged for %s (the recommendation does not cover them; reasons in the coverage table): %s.", v.Backend, joinAnd(classes)))
	}
	if prof := ds.profilesOf(v.Backend); prof != "" {
		ev = append(ev, "Durability profile of these numbers: "+prof+".")
	}
	return answer, ev
}

// comparedLine says which classes the qualifiers were compared on and
// how the others fared there.
func (ds *dataset) comparedLine(ch Choice, q question) string {
	var qual []string
	for _, v := range ch.Verdicts {
		if v.Qualifies {
			qual = append(qual, v.Backend)
		}
	}
	if len(qual) < 2 {
		return fmt.Sprintf("The only qualifying backend; it faced %s.", orUnset(joinAnd(verdictOf(ch, ch.Backend).Faced), "no fault class"))
	}
	if len(ch.Compared) == 0 {
		return fmt.Sprintf("Compared with %s on no fault class: they faced none in common, so only speed and cost ranked them.", joinAnd(without(qual, ch.Backend)))
	}
	what := "double-grant incidents per injection"
	if q == forCorrectness {
		what = "lock-bug incidents per injection"
	}
	var parts []string
	for _, b := range qual {
		t := ds.evidenceOn(b, ch.Compared)
		k := t.Incidents
		if q == forCorrectness {
			k = t.lockBugs()
		}
		parts = append(parts, fmt.Sprintf("%s %s", b, perInjection(k, t.tally).cell()))
	}
	return fmt.Sprintf("Compared with %s on the classes all of them faced — %s: %s: %s.", joinAnd(without(qual, ch.Backend)), joinAnd(ch.Compared), what, strings.Join(parts, ", "))
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
		parts = append(parts, fmt.Sprintf("%s %s of baseline, recovery %s", cls, spreadPct(a.inFault), spreadSeconds(a.recovery)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Availability in fault windows (grants as a share of its own baseline; time to recover): " + strings.Join(parts, "; ") + "."
}

// rankingLine names the qualifying backends set apart before speed, and
// on what.
func rankingLine(ch Choice) string {
	var parts []string
	for _, o := range ch.Verdicts {
		if o.Qualifies && (strings.HasPrefix(o.Standing, "set apart on safety") || strings.HasPrefix(o.Standing, "set apart on availability")) {
			parts = append(parts, o.Backend+" ("+o.brief+")")
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "Qualified but set apart before speed: " + strings.Join(parts, "; ") + "."
}

// speedLine words the choice's speed and how it compares with the
// backends that reached the speed step.
func (ds *dataset) speedLine(ch Choice, v Verdict, workload string) string {
	if v.Throughput <= 0 {
		return "Fault-free speed: not measured on the reference workload."
	}
	g := ds.peak(v.Backend, workload, v.Durability)
	s := fmt.Sprintf("Speed: %s grants/s at %d clients on workload %s (%s profile), acquire p99 %s",
		spreadRate(g.Speed), v.Clients, workload, v.Durability, fmtUS(float64(v.P99US)))
	if g.Speed.N < minSpeedTrials {
		s += fmt.Sprintf("; from %s, too few to call any backend faster", plural(int64(g.Speed.N), "trial"))
	}
	var others []string
	for _, o := range ch.Verdicts {
		reached := strings.HasPrefix(o.Standing, "tied") || strings.HasPrefix(o.Standing, "set apart on speed")
		if !o.Qualifies || o.Backend == v.Backend || o.Throughput <= 0 || !reached {
			continue
		}
		og := ds.peak(o.Backend, workload, o.Durability)
		word := "indistinguishable here"
		if og.Speed.N >= minSpeedTrials && g.Speed.N >= minSpeedTrials {
			switch g.Speed.Compare(og.Speed) {
			case 1:
				word = "slower"
			case -1:
				word = "faster"
			}
		}
		others = append(others, fmt.Sprintf("%s %s, %s", o.Backend, spreadRate(og.Speed), word))
	}
	if len(others) > 0 {
		s += "; " + strings.Join(others, "; ")
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

// without returns s without v.
func without(s []string, v string) []string {
	return slices.DeleteFunc(slices.Clone(s), func(x string) bool { return x == v })
}
