package report

import (
	"fmt"
	"slices"
	"strings"
)

// controlVerdict is why control b never qualifies, with what it showed.
func (ds *dataset) controlVerdict(b string) string {
	t := totals(ds.find(query{Backend: b, Fault: faultNone}))
	s := "the control: it excludes nobody, so it never qualifies; it is there to show the checker sees double grants"
	if t.Acquired > 0 {
		s += fmt.Sprintf(" (double-grant incidents without faults: %s)", perGrant(t.Incidents, t.Contended))
	}
	return s
}

// efficiency judges every backend for efficiency locks by the Rules.
func (ds *dataset) efficiency() Choice {
	ch := Choice{Judgeable: true}
	if len(ds.find(query{Fault: faultNone})) == 0 {
		ch.Judgeable = false
		ch.Missing = append(ch.Missing, `valid cases without faults (fault "none")`)
	}
	for _, b := range ds.Backends {
		v := Verdict{Backend: b}
		gs := ds.find(query{Backend: b, Fault: faultNone})
		t := totals(gs)
		maxClients := 0
		for _, g := range gs {
			maxClients = max(maxClients, g.Clients)
		}
		clean := perGrant(t.Incidents, t.Contended)
		switch {
		case ds.isControl(b):
			v.Reason = ds.controlVerdict(b)
		case len(gs) == 0:
			v.Reason = "not judged: not run without faults"
			if ds.variantOnly(b) {
				v.Reason += " (a variant, run only under the faults it exists for)"
			}
		case maxClients < 2:
			v.Reason = "only run with 1 client without faults: a double grant could not show"
		case t.Acquired == 0:
			v.Reason = "acquired no lock without faults"
		case t.Incidents+t.StaleAccepted+t.LostUpdates > 0:
			v.Reason = "without faults: " + countsText(t, false)
		default:
			v.Qualifies = true
			v.Reason = fmt.Sprintf("double-grant incidents without faults: %s, up to %d clients", clean, maxClients)
		}
		if v.Qualifies {
			if bs := ds.classBounds(b, "", ds.classesOf(b), kindIncident); len(bs) > 0 {
				v.Reason += "; under faults (tolerated, counted), double-grant incidents, " + ds.withOne() + ": " + boundsText(bs)
			}
		}
		ch.Verdicts = append(ch.Verdicts, v)
	}
	return ch
}

// countsText words the violations of t: incidents by class, stale
// writes, lost updates, token regressions — the nonzero ones, or all
// when none is.
func countsText(t group, fenced bool) string {
	var parts []string
	add := func(k int64, what string) {
		if k > 0 {
			parts = append(parts, plural(k, what))
		}
	}
	add(t.IncidentsLockBug, "lock-bug incident")
	add(t.IncidentsUnclassified, "unclassified incident")
	add(t.IncidentsAmbiguous, "ambiguous incident")
	add(t.IncidentsExpired, "expired-holder incident")
	add(t.StaleAccepted, "stale write accepted")
	add(t.LostUpdates, "lost update")
	add(t.TokenRegressions, "token regression")
	if fenced && t.StaleRejected > 0 {
		parts = append(parts, plural(t.StaleRejected, "stale write")+" rejected")
	}
	if len(parts) == 0 {
		return "no incident, stale write, lost update or token regression"
	}
	return strings.ReplaceAll(strings.Join(parts, ", "), "stale write accepteds", "stale writes accepted")
}

// isServerFault reports whether a fault class acts on the lock's servers
// rather than on its clients: every class but none and client-pause.
func isServerFault(class string) bool {
	return class != faultNone && class != faultPause && class != unsetLabel
}

// correctness judges every backend for correctness locks by the Rules.
func (ds *dataset) correctness() Choice {
	ch := Choice{Judgeable: true}
	fenced := ds.find(query{Guard: guardFenced})
	if !slices.ContainsFunc(fenced, func(g *group) bool { return g.FaultClass == faultPause }) {
		ch.Judgeable = false
		ch.Missing = append(ch.Missing, `valid fenced (guard "fence" or "fence-rw") cases under client-pause`)
	}
	if !slices.ContainsFunc(fenced, func(g *group) bool { return isServerFault(g.FaultClass) }) {
		ch.Judgeable = false
		ch.Missing = append(ch.Missing, "valid fenced cases under a server-side fault (server-pause, restart, crash-minority, partition, "+
			"...)")
	}
	for _, b := range ds.Backends {
		v := Verdict{Backend: b}
		fs := ds.find(query{Backend: b, Guard: guardFenced})
		tf := totals(fs)
		var fencedClasses []string
		for _, g := range fs {
			if g.FaultClass == faultNone || g.Injections > 0 {
				fencedClasses = appendNew(fencedClasses, g.FaultClass)
			}
		}
		faced := ds.classesOf(b)
		every := totals(ds.find(query{Backend: b}))
		lockBugs := ds.lockBugsByClass(b)
		switch {
		case ds.isControl(b):
			v.Reason = ds.controlVerdict(b)
		case len(ds.find(query{Backend: b})) == 0:
			v.Reason = "not judged: every case it ran was invalid"
		case len(lockBugs) > 0:
			v.Reason = "lock bugs: " + strings.Join(lockBugs, "; ")
		case ds.variantOnly(b):
			// Not judged under the classes the suite left out for it, it
			// would narrow the classes every candidate is compared on.
			v.Reason = "not a candidate: a variant, run only under the faults it exists for; its default backend stands for it"
		case len(fs) == 0:
			v.Reason = "not judged: never run with fencing"
		case !tf.Fencing:
			v.Reason = "issues no fencing tokens: its fenced cases ran without token checks"
		case tf.StaleAccepted+tf.LostUpdates+tf.TokenRegressions > 0:
			v.Reason = "with fencing: " + ds.fencedFailures(b)
		case every.LinearizableFenced.False > 0:
			v.Reason = fmt.Sprintf("porcupine's fenced-mutex check failed %s: its tokens did not order its grants",
				plural(int64(every.LinearizableFenced.False), "history"))
		case every.LinearizableFenced.Unknown+every.LinearizableFenced.Unchecked > 0:
			v.Reason = fmt.Sprintf("not judged: porcupine's fenced-mutex check is not true on %s (%s) — unknown is not a pass",
				plural(int64(every.LinearizableFenced.Unknown+every.LinearizableFenced.Unchecked), "history"), every.LinearizableFenced.withReasons())
		case !slices.Contains(fencedClasses, faultPause):
			v.Reason = "not judged: not run with fencing under client-pause, or none of those injections tested anything"
		case !slices.ContainsFunc(fencedClasses, isServerFault):
			v.Reason = "not judged: not run with fencing under any server-side fault, or none of those injections tested anything"
		default:
			v.Qualifies = true
			v.Reason = ds.correctnessEvidence(b, faced, every)
		}
		v.Fencing = ds.fencingNeed(b)
		ch.Verdicts = append(ch.Verdicts, v)
	}
	return ch
}

// correctnessEvidence words why a backend qualifies for correctness, per
// fault class and profile in the words of the safety table: no lock bug,
// no stale write through fencing, its fenced-mutex verdicts, and the
// ambiguous and expired-holder incidents it had.
func (ds *dataset) correctnessEvidence(b string, faced []string, every group) string {
	free := totals(ds.find(query{Backend: b, Fault: faultNone}))
	s := "no lock-bug incident; " + ds.withOne() + ": " + boundsText(ds.classBounds(b, "", faced, kindLockBug))
	if free.Cases > 0 {
		s += "; without faults " + perGrant(free.lockBugs(), free.Contended).cell()
	}
	s += "; stale writes accepted with fencing, " + ds.withOne() + ": " + boundsText(ds.classBounds(b, guardFenced, faced, kindStale))
	s += fmt.Sprintf("; lost updates and token regressions with fencing: 0; porcupine's fenced-mutex check true on every history (%s)",
		every.LinearizableFenced)
	if amb := withEvents(ds.classBounds(b, "", faced, kindAmbiguous)); len(amb) > 0 {
		s += "; ambiguous incidents (inside the clock bounds of the contract line: neither a lock bug nor an expired holder): " +
			"" + boundsText(amb)
	}
	if exp := withEvents(ds.classBounds(b, "", faced, kindExpired)); len(exp) > 0 {
		s += "; expired-holder incidents (holders that outlived their lease: what fencing is for): " + boundsText(exp)
	}
	if every.Unfenced {
		s += "; some fenced cases ran without token checks"
	}
	return s
}

// lockBugsByClass returns, per class (fault none included) and profile,
// the lock-bug incidents of a backend, with their bounds.
func (ds *dataset) lockBugsByClass(backend string) []string {
	var out []string
	for _, cls := range ds.Classes {
		for _, d := range ds.Durabilities {
			t := totals(ds.find(query{Backend: backend, Class: cls, Durability: d}))
			if t.lockBugs() == 0 {
				continue
			}
			s := fmt.Sprintf("under %s (%s profile): %s; %s",
				cls, d, plural(t.lockBugs(), "incident"), rateOf(t, kindLockBug, cls).hadOne())
			if t.IncidentsUnclassified > 0 {
				s += fmt.Sprintf(", %d of them not classified by the judge", t.IncidentsUnclassified)
			}
			out = append(out, s)
		}
	}
	return out
}

// fencedFailures words what went wrong with fencing on, class by class.
func (ds *dataset) fencedFailures(backend string) string {
	var out []string
	for _, cls := range ds.Classes {
		t := totals(ds.find(query{Backend: backend, Class: cls, Guard: guardFenced}))
		if t.StaleAccepted+t.LostUpdates+t.TokenRegressions == 0 {
			continue
		}
		var parts []string
		if t.StaleAccepted > 0 {
			parts = append(parts, fmt.Sprintf("%s stale writes accepted (%s had one)",
				fmtCount(t.StaleAccepted), rateOf(t, kindStale, cls)))
		}
		if t.LostUpdates > 0 {
			parts = append(parts, plural(t.LostUpdates, "lost update"))
		}
		if t.TokenRegressions > 0 {
			parts = append(parts, plural(t.TokenRegressions, "token regression"))
		}
		out = append(out, strings.Join(parts, ", ")+" under "+cls)
	}
	return strings.Join(out, "; ")
}

// fencingNeed says whether a backend needed fencing, with the evidence.
func (ds *dataset) fencingNeed(backend string) string {
	var evidence []string
	for _, cls := range ds.Classes {
		if t := totals(ds.find(query{Backend: backend, Guard: guardNone, Class: cls})); t.StaleAccepted+t.LostUpdates > 0 {
			evidence = append(evidence, fmt.Sprintf("without fencing %s under %s",
				countsText(group{tally: tally{StaleAccepted: t.StaleAccepted, LostUpdates: t.LostUpdates}}, false), cls))
		}
		if t := totals(ds.find(query{Backend: backend, Class: cls})); t.IncidentsExpired > 0 {
			evidence = append(evidence, fmt.Sprintf("%s under %s", plural(t.IncidentsExpired, "expired-holder incident"), cls))
		}
	}
	switch {
	case len(evidence) > 0:
		return "required: " + strings.Join(evidence, "; ")
	case len(ds.find(query{Backend: backend, Guard: guardNone, Class: faultPause})) > 0:
		return "not shown necessary by this run: no unfenced case accepted a stale write and no holder outlived its lease"
	}
	return "unknown: not run without fencing under client-pause"
}
