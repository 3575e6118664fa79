package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/results"
)

// caveats lists what the measurements exposed, from the counts: the run
// partial or with invalid cases; lock-bug and unclassified incidents,
// expired-holder incidents explained, stale writes accepted per guard,
// token regressions, a client-pause that produced nothing, histories the
// checker could not decide; then what limits every conclusion (the
// bounds the run reaches, too few trials for speed, clients that were
// goroutines under a pause, no violation anywhere).
func (ds *dataset) caveats() []string {
	var out []string
	if ds.File.Partial {
		out = append(out, "The run is partial (interrupted): the recommendation covers only the cases that ran.")
	}
	if n := len(ds.Invalid); n > 0 {
		were := fmt.Sprintf("%d cases were", n)
		if n == 1 {
			were = "1 case was"
		}
		out = append(out, were+" excluded as invalid (the fault failed to inject as planned); they are listed under \"Invalid cases\" and no conclusion uses them.")
	}
	for _, b := range ds.Backends {
		if bugs := ds.lockBugsByClass(b); len(bugs) > 0 {
			what := "granted the key while the previous holder's lease was still valid by the lock's own promise"
			if ds.isControl(b) {
				what = "the control excludes nobody: this is the checker seeing double grants, as it should"
			}
			out = append(out, fmt.Sprintf("%s: lock-bug incidents %s — %s.", b, strings.Join(bugs, "; "), what))
		}
	}
	for _, b := range ds.realBackends() {
		var parts []string
		for _, cls := range ds.Classes {
			t := totals(ds.find(query{Backend: b, Class: cls}))
			if t.IncidentsExpired == 0 {
				continue
			}
			ft := totals(ds.find(query{Backend: b, Class: cls, Guard: guardFence}))
			nt := totals(ds.find(query{Backend: b, Class: cls, Guard: guardNone}))
			parts = append(parts, fmt.Sprintf("%s under %s (with fencing %d stale writes rejected, %d accepted; without, %d accepted)",
				perInjection(t.IncidentsExpired, t.tally), cls, ft.StaleRejected, ft.StaleAccepted, nt.StaleAccepted))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s: expired-holder incidents %s — a holder went on after its lease had ended (a pause or partition longer than the lease) while another held the key; only a fencing resource makes those writes harmless.", b, strings.Join(parts, "; ")))
		}
	}
	for _, cls := range ds.Classes {
		for _, guard := range ds.Guards {
			out = append(out, ds.staleLines(cls, guard)...)
		}
		for _, b := range ds.Backends {
			if t := totals(ds.find(query{Backend: b, Class: cls})); t.TokenRegressions > 0 {
				out = append(out, fmt.Sprintf("%s: %s under %s — a later grant got a lower token, so its tokens do not order holders across this fault.",
					b, plural(t.TokenRegressions, "token regression"), cls))
			}
		}
	}
	for _, b := range ds.realBackends() {
		for _, guard := range ds.Guards {
			gs := ds.find(query{Backend: b, Class: faultPause, Guard: guard})
			if t := totals(gs); len(gs) > 0 && t.StaleAccepted+t.StaleRejected+t.Incidents == 0 {
				out = append(out, fmt.Sprintf("%s (guard %s): client-pause produced no stale write and no incident at all — the pauses may not have outlasted the lease, so this result shows little.", b, guard))
			}
		}
	}
	out = append(out, ds.checkerCaveats()...)
	out = append(out, ds.limits()...)
	return out
}

// staleLines reports stale writes accepted and lost updates under a
// class and guard: one line when every backend run there (at least two)
// accepted stale writes, else one per backend.
func (ds *dataset) staleLines(class, guard string) []string {
	with := "with guard " + guard
	switch guard {
	case guardNone:
		with = "without fencing"
	case guardFence:
		with = "with fencing"
	}
	var ran, all int
	var hits, lines []string
	for _, b := range ds.realBackends() {
		gs := ds.find(query{Backend: b, Class: class, Guard: guard})
		if len(gs) == 0 {
			continue
		}
		ran++
		t := totals(gs)
		if t.StaleAccepted > 0 {
			all++
		}
		if t.StaleAccepted+t.LostUpdates == 0 {
			continue
		}
		text := countsText(group{tally: tally{StaleAccepted: t.StaleAccepted, LostUpdates: t.LostUpdates}}, false)
		if class != faultNone {
			text += fmt.Sprintf(" in %s", plural(t.Injections, "injection"))
		}
		hits = append(hits, b+" "+text)
		lines = append(lines, fmt.Sprintf("%s %s: %s under %s.", b, with, text, class))
	}
	if ran >= 2 && all == ran {
		return []string{fmt.Sprintf("Every backend %s accepted stale writes under %s: %s.", with, class, strings.Join(hits, "; "))}
	}
	return lines
}

// checkerCaveats says where the checker could not decide, and whether
// it saw anything at all.
func (ds *dataset) checkerCaveats() []string {
	var out []string
	var unknown verdicts
	for _, g := range ds.Groups {
		unknown.Unknown += g.Linearizable.Unknown + g.LinearizableFenced.Unknown
		if g.Linearizable.Unknown+g.LinearizableFenced.Unknown > 0 {
			for _, r := range append(slices.Clone(g.Linearizable.Reasons), g.LinearizableFenced.Reasons...) {
				unknown.Reasons = appendNew(unknown.Reasons, r)
			}
		}
	}
	if unknown.Unknown > 0 {
		out = append(out, fmt.Sprintf("%s could not be decided by porcupine (\"unknown\"): %s. The overlap counts stand; those histories add no linearizability evidence.",
			plural(int64(unknown.Unknown), "history verdict"), brief(unknown.Reasons)))
	}
	seen := false
	for _, g := range ds.Groups {
		seen = seen || g.Incidents > 0 || g.violations() > 0
	}
	if len(ds.Groups) > 0 && !seen {
		out = append(out, "No case in this run counted any incident or violation. Without a case known to violate (the noop control, or a fault that defeats a lock), these zeros do not show that the checker can see violations.")
	}
	return out
}

// limits says what bounds every conclusion: the evidence the run
// reached per class, the trials behind speed, clients that were not
// processes under a pause, inferred injection counts.
func (ds *dataset) limits() []string {
	var out []string
	lo, hi := int64(-1), int64(0)
	for _, b := range ds.realBackends() {
		for _, cls := range ds.classesOf(b) {
			n := totals(ds.find(query{Backend: b, Class: cls})).Injections
			if lo < 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
	}
	if hi > 0 {
		out = append(out, fmt.Sprintf("The bounds this run reaches: a fault class a backend faced got between %s and %s (summed over trials, guards and variants of the class); with no incident that bounds the rate per injection at ≤ %s and ≤ %s respectively, at 95%%. More injections tighten them.",
			plural(lo, "injection"), plural(hi, "injection"), fmtPct(perInjection(0, tally{Injections: max(lo, 1)}).Upper95()), fmtPct(perInjection(0, tally{Injections: hi}).Upper95())))
	}
	fewest := 0
	for _, g := range ds.find(query{Fault: faultNone}) {
		if !ds.isControl(g.Backend) && (fewest == 0 || g.Trials < fewest) {
			fewest = g.Trials
		}
	}
	if fewest > 0 && fewest < minSpeedTrials {
		out = append(out, fmt.Sprintf("Some fault-free cases ran only %s: speed ranges from fewer than %d trials separate nothing, so no backend is called faster than another on them.",
			plural(int64(fewest), "trial"), minSpeedTrials))
	}
	var goroutines []string
	for _, g := range ds.find(query{Class: faultPause}) {
		if slices.Contains(g.ClientsAs, results.ClientsGoroutines) {
			goroutines = appendNew(goroutines, g.Backend)
		}
	}
	if len(goroutines) > 0 {
		out = append(out, fmt.Sprintf("client-pause ran with goroutine clients for %s: a goroutine's sleep is not a process stop (its timers and keepalives ran on), so those pauses flatter or harm the lock in ways a real GC pause would not.", joinAnd(goroutines)))
	}
	inferred := false
	for _, g := range ds.Groups {
		inferred = inferred || g.InjectionsInferred
	}
	if inferred {
		out = append(out, "Some fault cases recorded no injection count (a file from before the field): one injection per recorded fault window was assumed.")
	}
	return out
}
