package answer

import (
	"fmt"
	"strings"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// standing is one candidate's qualification for one intent.
type standing struct {
	b         *backend
	qualifies bool
	// final is set when no further evidence can make it qualify (a lock
	// bug seen, a stale write let through, no fencing tokens).
	final  bool
	reason string
}

// candidates returns the backends the profile asks about: its Backends
// when it names any, else every backend of the run but the controls
// (they exclude nobody, and run only to prove the checkers see).
func (ev *evidence) candidates(p results.Profile) ([]*backend, error) {
	if len(p.Backends) == 0 {
		var out []*backend
		for _, n := range ev.names {
			if b := ev.backends[n]; !b.control {
				out = append(out, b)
			}
		}
		return out, nil
	}
	var out []*backend
	for _, n := range p.Backends {
		b := ev.backends[n]
		if b == nil {
			b = ev.unrun[n]
		}
		if b == nil {
			return nil, fmt.Errorf("profile backend %q: not in the results (they hold %s)", n, strings.Join(ev.names, ", "))
		}
		if !b.control {
			out = append(out, b)
		}
	}
	return out, nil
}

// efficiency qualifies a backend for efficiency locks: it ran without
// faults with at least 2 clients, acquired locks, and had no incident of
// any kind, no stale write accepted and no lost update there.
func efficiency(b *backend) standing {
	s := standing{b: b}
	f := b.free
	switch {
	case f.cases == 0:
		s.reason = "not judged: not run without faults"
	case f.maxClients < 2:
		s.reason = "only run with 1 client without faults: a double grant could not show"
	case f.acquired == 0:
		s.reason = "acquired no lock without faults"
	case f.incidents+f.staleAccepted+f.lostUpdates > 0:
		s.final = true
		s.reason = fmt.Sprintf("without faults: %d double-grant incidents, %d stale writes accepted, %d lost updates",
			f.incidents, f.staleAccepted, f.lostUpdates)
	default:
		s.qualifies = true
		s.reason = "no double grant without faults: " + boundWords(stats.Rate{K: 0, N: f.contended}, "contended grant")
	}
	return s
}

// guardFor returns the guard a profile's resource can do with a token:
// fence-rw, fence, none, or "" for the strongest each case ran.
func guardFor(token string) string {
	switch token {
	case results.TokenReadWrite:
		return guardFenceRW
	case results.TokenWrite:
		return guardFence
	case results.TokenNone:
		return guardNone
	}
	return ""
}

// correctness qualifies a backend for correctness locks: no lock bug in
// any tested injection (an invalid case's included) nor without faults;
// with the guard the resource can do (fencing tokens, unless it can do
// none), no stale write accepted, no update lost, no token regression,
// and the fenced-mutex check true on every history; and put through
// client-pause and a server-side fault with tested injections; and none
// of its planned cases cut (by the run's end, or left out of round 1 for
// the budget) and not run since.
func correctness(b *backend, p results.Profile) standing {
	s := standing{b: b}
	var bugs []string
	for _, ce := range b.sortedClasses() {
		if ce.lockBug > 0 {
			w := fmt.Sprintf("under %s %s", ce.label(), hadWords(ce.bugRate(), "tested injection"))
			if ce.fromInvalid > 0 {
				w += fmt.Sprintf(" (%d of the tested injections from cases later invalid: what they showed stands)", ce.fromInvalid)
			}
			bugs = append(bugs, w)
		}
	}
	if b.free.lockBugs > 0 {
		bugs = append(bugs, fmt.Sprintf("without faults %d lock-bug incidents in %d contended grants", b.free.lockBugs, b.free.contended))
	}
	guard := guardFor(p.Token)
	var g *guardEvidence
	switch guard {
	case "":
		g = b.guards[guardFenceRW]
		if g == nil {
			g, guard = b.guards[guardFence], guardFence
		} else {
			guard = guardFenceRW
		}
	default:
		g = b.guards[guard]
	}
	switch {
	case len(bugs) > 0:
		s.final = true
		s.reason = "lock bugs: " + strings.Join(bugs, "; ")
	case b.valid+b.invalid == 0:
		s.reason = "not judged: " + cutWords(b)
	case b.valid == 0:
		s.reason = "not judged: every case it ran was invalid"
	case g == nil:
		s.reason = fmt.Sprintf("not judged: never run under guard %s (what the resource can do with a token)", guard)
	case guard != guardNone && !g.fencing:
		s.final = true
		s.reason = "issues no fencing tokens: its fenced cases ran without token checks"
	case g.staleAccepted+g.lostUpdates+g.tokenRegressions > 0:
		s.final = true
		s.reason = fmt.Sprintf("under guard %s: %d stale writes accepted, %d lost updates, %d token regressions (under %s)",
			guard, g.staleAccepted, g.lostUpdates, g.tokenRegressions, strings.Join(g.staleClasses, ", "))
		if fenceLimited(s, p) {
			s.reason += ": late writes after pauses longer than its lease, which a write-only fence lets in for every lease lock"
		}
	case guard != guardNone && g.fencedFalse > 0:
		s.final = true
		s.reason = fmt.Sprintf("porcupine's fenced-mutex check failed on %d histories: its tokens did not order its grants", g.fencedFalse)
	case guard != guardNone && g.fencedUnknown > 0:
		s.reason = fmt.Sprintf("not judged: porcupine's fenced-mutex check is not true on %d histories (%s): unknown is not a pass",
			g.fencedUnknown, strings.Join(g.reasons, "; "))
	case g.classes[classPause] == 0:
		s.reason = fmt.Sprintf("not judged: no tested injection of client-pause under guard %s", guard)
	case !hasServerFault(g):
		s.reason = fmt.Sprintf("not judged: no tested injection of a server-side fault under guard %s", guard)
	case len(b.cut) > 0:
		// The cases a run stops before are its last ones: a candidate
		// must not qualify on having missed the variant that put the
		// others out.
		s.reason = "not judged: " + cutWords(b)
	default:
		s.qualifies = true
		s.reason = fmt.Sprintf("no lock bug in any tested injection; under guard %s no stale write accepted, no update lost", guard)
	}
	return s
}

// cutWords says which of b's planned cases did not run.
func cutWords(b *backend) string {
	if len(b.cut) == 0 {
		return "it ran no case"
	}
	return fmt.Sprintf("its planned cases under %s did not run (left out for the budget, or the run stopped before them)",
		strings.Join(b.cut, ", "))
}

// hasServerFault reports whether the guard's cases had tested injections
// of a class that acts on the servers (all but none and client-pause).
func hasServerFault(g *guardEvidence) bool {
	for cls, n := range g.classes {
		if cls != faultNone && cls != classPause && n > 0 {
			return true
		}
	}
	return false
}

// boundWords is "0 in 40 tested injections: at most 7.2% at 95%".
func boundWords(r stats.Rate, unit string) string {
	if !r.Known() {
		return fmt.Sprintf("%d in no %s: not judged", r.K, unit)
	}
	if r.K == 0 {
		return fmt.Sprintf("0 in %d %s: at most %s at 95%%", r.N, plural(r.N, unit), pct(r.Upper95()))
	}
	return fmt.Sprintf("%d in %d %s (%s): at most %s at 95%%", r.K, r.N, plural(r.N, unit), pct(r.Observed()), pct(r.Upper95()))
}

// hadWords is "in 2 of 3 tested injections (67%; at most 99% at 95%)".
func hadWords(r stats.Rate, unit string) string {
	return fmt.Sprintf("in %d of %d %s (%s; at most %s at 95%%)", r.K, r.N, plural(r.N, unit), pct(r.Observed()), pct(r.Upper95()))
}

// plural is unit with an s unless n is 1.
func plural(n int64, unit string) string {
	if n == 1 {
		return unit
	}
	return unit + "s"
}

// pct is a fraction as a percentage with the digits that matter.
func pct(p float64) string {
	v := p * 100
	switch {
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f%%", v)
	case v >= 1:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + "%"
	}
	return fmt.Sprintf("%.2g%%", v)
}
