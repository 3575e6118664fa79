package report

import (
	"fmt"
	"maps"
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
			what := "granted the key before the previous grant's contract line: a key it had promised to its holder"
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
			parts = append(parts, fmt.Sprintf("under %s %s, %s (with fencing %d stale writes rejected, %d accepted; without, %d accepted)",
				cls, plural(t.IncidentsExpired, "incident"), rateOf(t, kindExpired, cls).hadOne(), ft.StaleRejected, ft.StaleAccepted, nt.StaleAccepted))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s: expired-holder incidents %s — a holder went on after its lease had ended (a pause or partition longer than the lease) while another held the key; only a fencing resource makes those writes harmless.", b, strings.Join(parts, "; ")))
		}
	}
	out = append(out, ds.contractCaveats()...)
	out = append(out, ds.toldCaveats()...)
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
			text += fmt.Sprintf(" in %s", plural(t.Injections, "tested injection"))
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
			for _, d := range ds.Durabilities {
				gs := ds.find(query{Backend: b, Class: cls, Durability: d})
				if len(gs) == 0 {
					continue
				}
				n := totals(gs).Injections
				if lo < 0 || n < lo {
					lo = n
				}
				hi = max(hi, n)
			}
		}
	}
	if hi > 0 {
		out = append(out, fmt.Sprintf("The bounds this run reaches: a fault class a backend faced under one profile got between %s and %s (summed over trials, guards and variants of the class, never over classes); with none followed by an incident that bounds the rate at ≤ %s and ≤ %s respectively, at 95%%. More injections tighten them.",
			plural(lo, "tested injection"), plural(hi, "tested injection"), fmtPct(perInjection(0, tally{Injections: max(lo, 1)}).Upper95()), fmtPct(perInjection(0, tally{Injections: hi}).Upper95())))
	}
	fewest := 0
	for _, g := range ds.find(query{Fault: faultNone}) {
		if !ds.isControl(g.Backend) && (fewest == 0 || g.Trials < fewest) {
			fewest = g.Trials
		}
	}
	if fewest > 0 && fewest < minSpeedTrials {
		out = append(out, fmt.Sprintf("Some fault-free cases ran only %s: the speed test cannot separate fewer than %d trials a side, so no backend is called faster than another on them.",
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
	inferred, unjudged, shared := false, false, false
	var untested int64
	var whyNot []string
	for _, g := range ds.Groups {
		inferred = inferred || g.InjectionsInferred
		unjudged = unjudged || g.Unjudged
		shared = shared || (g.Trials > 1 && !g.Independent)
	}
	all := totals(ds.Groups)
	for _, id := range slices.Sorted(maps.Keys(all.runs)) {
		r := all.runs[id]
		untested += r.Untested
		for _, w := range r.WhyNot {
			whyNot = appendNew(whyNot, w)
		}
	}
	if inferred {
		out = append(out, "Some fault cases recorded no injection count (a file from before the field): one injection per recorded fault window was assumed.")
	}
	if unjudged {
		out = append(out, "Some fault cases did not judge their injections (whether each met a held key and a granting lock, and had its effect read back): every one of their injections was counted as tested, which a skeptic would not grant; their rates read \"injections\", not \"tested injections\".")
	}
	if untested > 0 {
		out = append(out, fmt.Sprintf("%s tested nothing and entered no rate: %s.", plural(untested, "injection"), brief(whyNot)))
	}
	if shared {
		out = append(out, "Trials of a combination ran one after another on the same servers (fresh worker processes, servers kept for the run): they are not independent samples, so each combination counts as one trial where independence matters — no backend is called faster than another on their spread — and the ranges shown are run-to-run spread on one set of servers.")
	}
	return out
}

// toldCaveats say, per backend and class, how many of its stale writes
// came after its lease had told the holder it had ended — the lock
// revoked the lease in time — and how many were silent.
func (ds *dataset) toldCaveats() []string {
	var out []string
	for _, b := range ds.realBackends() {
		var parts []string
		for _, cls := range ds.Classes {
			t := totals(ds.find(query{Backend: b, Class: cls}))
			if t.StaleTold+t.StaleSilent == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("under %s %d told, %d silent", cls, t.StaleTold, t.StaleSilent))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s: stale writes made after its lease had told the holder it ended (the lock revoked it in time: a careful client holds back) against those made with the lease saying nothing (only fencing stops them): %s.",
				b, strings.Join(parts, "; ")))
		}
	}
	return out
}

// contractCaveats are the findings about leases against their contract
// (a lease that reported less validity than its lock promises, or more
// than it can give) and the ambiguous incidents, per backend.
func (ds *dataset) contractCaveats() []string {
	var out []string
	for _, b := range ds.realBackends() {
		t := totals(ds.find(query{Backend: b}))
		if t.ValidityShort > 0 {
			out = append(out, fmt.Sprintf("Finding, %s: %s of %s reported a ValidUntil earlier than its contract promises (by up to %s): a line drawn by the lease would have turned its double grants into expired holders; this report draws it by the contract.",
				b, plural(t.ValidityShort, "lease"), plural(t.Acquired, "grant"), fmtMS(t.ValidityShortMaxMS)))
		}
		if t.ValidityLong > 0 {
			out = append(out, fmt.Sprintf("Finding, %s: %s of %s reported a ValidUntil later than the lock can give (by up to %s): a holder that trusts it may write after the key went to someone else.",
				b, plural(t.ValidityLong, "lease"), plural(t.Acquired, "grant"), fmtMS(t.ValidityLongMaxMS)))
		}
		var amb []string
		for _, cls := range ds.Classes {
			if bs := withEvents(ds.classBounds(b, "", []string{cls}, kindAmbiguous)); len(bs) > 0 {
				amb = append(amb, boundsText(bs))
			}
		}
		if len(amb) > 0 {
			out = append(out, fmt.Sprintf("%s: ambiguous incidents %s — the later grant fell within the judge's clock bounds of the earlier grant's contract line, so neither a lock bug nor an expired holder can be claimed; they are counted apart.",
				b, strings.Join(amb, "; ")))
		}
	}
	return out
}
