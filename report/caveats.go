package report

import (
	_ "embed"
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
		out = append(out, were+" "+caveatText("excluded-as-invalid-fault"))
	}
	for _, b := range ds.Backends {
		if bugs := ds.lockBugsByClass(b); len(bugs) > 0 {
			what := caveatText("granted-key-before-previous")
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
			parts = append(parts, caveatf("under-with-fencing-stale", cls, plural(t.IncidentsExpired, "incident"),
				rateOf(t, kindExpired, cls).hadOne(), ft.StaleRejected, ft.StaleAccepted, nt.StaleAccepted))
		}
		if len(parts) > 0 {
			out = append(out, caveatf("expired-holder-incidents-holder", b, strings.Join(parts, "; ")))
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
				out = append(out, caveatf("under-later-grant-got", b, plural(t.TokenRegressions, "token regression"), cls))
			}
		}
	}
	for _, b := range ds.realBackends() {
		for _, guard := range ds.Guards {
			gs := ds.find(query{Backend: b, Class: faultPause, Guard: guard})
			if t := totals(gs); len(gs) > 0 && t.StaleAccepted+t.StaleRejected+t.Incidents == 0 {
				out = append(out, caveatf("guard-client-pause-produced", b, guard))
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
		out = append(out, caveatf("could-not-be-decided", plural(int64(unknown.Unknown), "history verdict"), brief(unknown.Reasons)))
	}
	seen := false
	for _, g := range ds.Groups {
		seen = seen || g.Incidents > 0 || g.violations() > 0
	}
	if len(ds.Groups) > 0 && !seen {
		out = append(out, caveatText("no-case-this-run"))
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
		out = append(out, caveatf("bounds-this-run-reaches", plural(lo, "tested injection"), plural(hi, "tested injection"),
			fmtPct(perInjection(0, tally{Injections: max(lo, 1)}).Upper95()), fmtPct(perInjection(0, tally{Injections: hi}).Upper95())))
	}
	fewest := 0
	for _, g := range ds.find(query{Fault: faultNone}) {
		if !ds.isControl(g.Backend) && (fewest == 0 || g.Trials < fewest) {
			fewest = g.Trials
		}
	}
	if fewest > 0 && fewest < minSpeedTrials {
		out = append(out, caveatf("some-fault-free-cases", plural(int64(fewest), "trial"), minSpeedTrials))
	}
	var goroutines []string
	for _, g := range ds.find(query{Class: faultPause}) {
		if slices.Contains(g.ClientsAs, results.ClientsGoroutines) {
			goroutines = appendNew(goroutines, g.Backend)
		}
	}
	if len(goroutines) > 0 {
		out = append(out, caveatf("client-pause-ran-with", joinAnd(goroutines)))
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
		out = append(out, caveatText("some-fault-cases-recorded"))
	}
	if unjudged {
		out = append(out, caveatText("some-fault-cases-did"))
	}
	if untested > 0 {
		out = append(out, fmt.Sprintf("%s tested nothing and entered no rate: %s.", plural(untested, "injection"), brief(whyNot)))
	}
	if shared {
		out = append(out, caveatText("trials-combination-ran-one"))
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
			out = append(out, caveatf("stale-writes-made-after", b, strings.Join(parts, "; ")))
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
			out = append(out, caveatf("finding-reported-validuntil-earlier", b, plural(t.ValidityShort, "lease"), plural(t.Acquired, "grant"),
				fmtMS(t.ValidityShortMaxMS)))
		}
		if t.ValidityLong > 0 {
			out = append(out, caveatf("finding-reported-validuntil-later", b, plural(t.ValidityLong, "lease"), plural(t.Acquired, "grant"),
				fmtMS(t.ValidityLongMaxMS)))
		}
		var amb []string
		for _, cls := range ds.Classes {
			if bs := withEvents(ds.classBounds(b, "", []string{cls}, kindAmbiguous)); len(bs) > 0 {
				amb = append(amb, boundsText(bs))
			}
		}
		if len(amb) > 0 {
			out = append(out, caveatf("ambiguous-incidents-later-grant", b, strings.Join(amb, "; ")))
		}
	}
	return out
}

// caveatf is the caveat named key in caveats.md (embedded), formatted
// with args.
func caveatf(key string, args ...any) string { return fmt.Sprintf(caveatText(key), args...) }

// caveatText is the text of the caveat named key in caveats.md; a key
// missing from it is a bug, named in the text rather than a panic.
func caveatText(key string) string {
	if t, ok := caveatTexts[key]; ok {
		return t
	}
	return "(caveat " + key + " missing from caveats.md)"
}

//go:embed caveats.md
var caveatsMD string

// caveatTexts are the caveats of caveats.md by key.
var caveatTexts = sections(caveatsMD)

// sections reads a Markdown text of "## key" headings, each followed by
// one paragraph, into a map; the lines of a paragraph join with spaces.
func sections(md string) map[string]string {
	out := map[string]string{}
	key := ""
	for _, block := range strings.Split(md, "\n\n") {
		block = strings.TrimSpace(block)
		switch {
		case strings.HasPrefix(block, "## "):
			key = strings.TrimSpace(strings.TrimPrefix(block, "## "))
		case key != "" && block != "":
			out[key] = strings.ReplaceAll(block, "\n", " ")
			key = ""
		}
	}
	return out
}
