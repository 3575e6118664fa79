package report

import (
	"fmt"
	"strings"
)

// caveats lists what the measurements exposed, each from the counts,
// fault by fault: overlaps; stale writes accepted and lost updates per
// guard (one line when every backend run there did it); token
// regressions; a client-pause that never produced a stale write. Then
// the absence of any violation at all (which says nothing about the
// checker), single trials and a partial run.
func (ds *dataset) caveats() []string {
	var out []string
	if ds.File.Partial {
		out = append(out, "The run is partial (interrupted): the recommendation covers only the cases that ran.")
	}
	for _, f := range ds.Faults {
		out = append(out, ds.everyOrEach(f, "", func(t group) (int64, string) { return t.Overlaps, plural(t.Overlaps, "overlap") },
			func(t group) bool { return t.Overlaps > 0 }, "every backend run under %s had overlaps (two holders at once): %s.", "%s: %s under %s (two holders at once).")...)
		for _, guard := range ds.Guards {
			with := "with guard " + guard
			switch guard {
			case guardNone:
				with = "without fencing"
			case guardFence:
				with = "with fencing"
			}
			out = append(out, ds.everyOrEach(f, guard, func(t group) (int64, string) {
				return t.StaleAccepted + t.LostUpdates, violationText(group{StaleAccepted: t.StaleAccepted, LostUpdates: t.LostUpdates})
			}, func(t group) bool { return t.StaleAccepted > 0 }, "every backend "+with+" accepted stale writes under %s: %s.", "%s "+with+": %s under %s.")...)
		}
		for _, b := range ds.Backends {
			if t := totals(ds.find(group{Backend: b, Fault: f})); t.TokenRegressions > 0 {
				out = append(out, fmt.Sprintf("%s: %s under %s — a later grant got a lower token, so its tokens do not order holders across this fault.",
					b, plural(t.TokenRegressions, "token regression"), f))
			}
		}
		if f != faultPause {
			continue
		}
		for _, b := range ds.Backends {
			for _, guard := range ds.Guards {
				gs := ds.find(group{Backend: b, Fault: f, Guard: guard})
				if t := totals(gs); len(gs) > 0 && t.StaleAccepted+t.StaleRejected+t.Overlaps == 0 {
					out = append(out, fmt.Sprintf("%s (guard %s): client-pause produced no stale write at all — the pause may not have outlasted the lease, so this result shows little.", b, guard))
				}
			}
		}
	}
	seen := false
	maxTrials := 0
	for _, g := range ds.Groups {
		seen = seen || g.violations() > 0
		maxTrials = max(maxTrials, g.Trials)
	}
	if len(ds.Groups) > 0 && !seen {
		out = append(out, "No case in this run counted any violation. Without a case known to violate (the noop control, or a fault that defeats a lock), these zeros do not show that the checker can see violations.")
	}
	if maxTrials == 1 {
		out = append(out, "Every case ran one trial: the numbers have no measured spread, and a rare violation may simply not have happened.")
	}
	return out
}

// everyOrEach reports a count per backend under a fault (and guard, when
// not empty): one line saying every backend did it when all of at least
// two backends run there did, else one line per backend with a count.
// count returns the number and how to say it; all is what every
// backend must show for the single line.
func (ds *dataset) everyOrEach(fault, guard string, count func(group) (int64, string), all func(group) bool, every, each string) []string {
	var ran, alls int
	var hits, lines []string
	for _, b := range ds.Backends {
		gs := ds.find(group{Backend: b, Fault: fault, Guard: guard})
		if len(gs) == 0 {
			continue
		}
		ran++
		t := totals(gs)
		if all(t) {
			alls++
		}
		if n, text := count(t); n > 0 {
			hits = append(hits, fmt.Sprintf("%s %s", b, text))
			lines = append(lines, fmt.Sprintf(each, b, text, fault))
		}
	}
	if ran >= 2 && alls == ran {
		return []string{fmt.Sprintf(every, fault, strings.Join(hits, "; "))}
	}
	return lines
}
