package report

import (
	"fmt"
	"math"
	"slices"

	"github.com/lockbench/lockbench/results"
)

// tally is the safety evidence of some cases: what was injected and what
// went wrong, summed.
type tally struct {
	// Injections are the injections that enter rates and bounds: the
	// tested ones, and every one of a case whose run did not judge its
	// injections (Unjudged says so). Untested are the injections left
	// out because they tested nothing, WhyNot why.
	Injections, Untested int64
	WhyNot               []string
	Unjudged             bool
	// InjectionsInferred is set when some case recorded no injection
	// count and one per fault window was assumed (files from before the
	// field).
	InjectionsInferred bool
	// Hit counts, per kind of event, the injections of Injections
	// charged with at least one: the K of every bound per injection (an
	// injection is a trial; three incidents after one are one failed
	// trial, not three).
	Hit hits

	Overlaps, StaleAccepted, StaleRejected, LostUpdates, TokenRegressions int64
	OverlapsLockBug, OverlapsExpired, OverlapsAmbiguous                   int64
	// Incidents are episodes of two holders, judged against the lock's
	// contract: IncidentsLockBug granted before the earlier grant's
	// contract line, IncidentsExpired after it (the holder outlived its
	// lease), IncidentsAmbiguous within the clock bounds of the line,
	// and IncidentsUnclassified those the judge did not classify (files
	// from before it: any overlap is at least one incident), which the
	// rules treat as lock bugs since nothing shows they were not.
	Incidents, IncidentsLockBug, IncidentsExpired, IncidentsAmbiguous, IncidentsUnclassified int64
	// LeaseEnds counts sections whose lease told its holder it had
	// ended; StaleTold and StaleSilent split the stale writes by whether
	// the holder's lease had told it so before it wrote. Both are the
	// holders' doing, the same under every guard: counted once per run.
	LeaseEnds, StaleTold, StaleSilent int64
	// ValidityShort and ValidityLong count the grants whose lease
	// reported a validity outside its contract, less or more; the Max
	// fields are the largest departures (ms).
	ValidityShort, ValidityLong           int64
	ValidityShortMaxMS, ValidityLongMaxMS float64
}

// hits counts injections charged with at least one event of each kind.
type hits struct {
	Incident, LockBug, Ambiguous, Expired, Stale int64
}

func (h *hits) add(u hits) {
	h.Incident += u.Incident
	h.LockBug += u.LockBug
	h.Ambiguous += u.Ambiguous
	h.Expired += u.Expired
	h.Stale += u.Stale
}

// lockBugs is the incidents that count against a lock: lock bugs and
// incidents nobody classified.
func (t tally) lockBugs() int64 { return t.IncidentsLockBug + t.IncidentsUnclassified }

// addRun sums into t what the lock did in a run, u.
func (t *tally) addRun(u tally) { t.add(u.lockPart()) }

// lockPart is what the lock did in t: everything but what the resource's
// guard let through, which differs between the cases of one run.
func (t tally) lockPart() tally {
	t.StaleAccepted, t.StaleRejected, t.LostUpdates, t.Hit.Stale = 0, 0, 0, 0
	return t
}

// runOf names the run of the lock a case reports on. The runner judges
// one run's writes under several guards and writes a case per guard,
// all pointing at the run's history: cases sharing a history are one
// run. A case without a history is a run of its own.
func runOf(c *results.Case) string {
	if c.History != "" {
		return fmt.Sprintf("history %s|%s|%s", c.History, c.Host, orUnset(c.Durability, durabilityUnset))
	}
	return fmt.Sprintf("case %s|%d|%s", c.Key(), c.Trial, c.Host)
}

// runGroup is what the lock did in the run of case c: its grants, its
// safety tally without the guard's part, the verdicts, targets and
// availability.
func runGroup(c *results.Case) *group {
	r := &group{Acquired: c.Acquired, Contended: c.ContendedGrants, tally: tallyOf(c).lockPart()}
	r.Linearizable.add(c.Linearizable, c.LinearizableReason)
	r.LinearizableFenced.add(c.LinearizableFenced, c.LinearizableFencedReason)
	r.Targets = c.Targets
	r.addAvailability(c.Availability)
	return r
}

// addAvailability adds a case's availability samples to g: the in-fault
// share of each window, the in-fault p99, and each recovery (one that
// never came is infinite).
func (g *group) addAvailability(av *results.Availability) {
	if av == nil {
		return
	}
	g.InFault = append(g.InFault, inFaultShares(av)...)
	if av.InFaultP99US > 0 {
		g.InFaultP99 = append(g.InFaultP99, float64(av.InFaultP99US))
	}
	for _, x := range av.RecoveryS {
		if x < 0 {
			x = math.Inf(1)
		}
		g.Recovery = append(g.Recovery, x)
	}
}

// add sums u into t.
func (t *tally) add(u tally) {
	t.Injections += u.Injections
	t.Untested += u.Untested
	for _, w := range u.WhyNot {
		t.WhyNot = appendNew(t.WhyNot, w)
	}
	t.Unjudged = t.Unjudged || u.Unjudged
	t.InjectionsInferred = t.InjectionsInferred || u.InjectionsInferred
	t.Hit.add(u.Hit)
	t.LeaseEnds += u.LeaseEnds
	t.StaleTold += u.StaleTold
	t.StaleSilent += u.StaleSilent
	t.OverlapsAmbiguous += u.OverlapsAmbiguous
	t.IncidentsAmbiguous += u.IncidentsAmbiguous
	t.ValidityShort += u.ValidityShort
	t.ValidityLong += u.ValidityLong
	t.ValidityShortMaxMS = max(t.ValidityShortMaxMS, u.ValidityShortMaxMS)
	t.ValidityLongMaxMS = max(t.ValidityLongMaxMS, u.ValidityLongMaxMS)
	t.Overlaps += u.Overlaps
	t.StaleAccepted += u.StaleAccepted
	t.StaleRejected += u.StaleRejected
	t.LostUpdates += u.LostUpdates
	t.TokenRegressions += u.TokenRegressions
	t.OverlapsLockBug += u.OverlapsLockBug
	t.OverlapsExpired += u.OverlapsExpired
	t.Incidents += u.Incidents
	t.IncidentsLockBug += u.IncidentsLockBug
	t.IncidentsExpired += u.IncidentsExpired
	t.IncidentsUnclassified += u.IncidentsUnclassified
}

// tallyOf reads a case's safety counts. A case with overlaps but no
// incident count (a file from before the judge) is one incident, a lock
// bug if any overlap was classified one, expired-holder if all were,
// else unclassified. A fault case with no injection count injected once
// per recorded fault window. Only tested injections count (every one,
// marked Unjudged, when the run did not judge them), and the K of each
// kind is the counted injections charged with one (hitsOf).
func tallyOf(c *results.Case) tally {
	t := tally{
		Overlaps: c.Overlaps, StaleAccepted: c.StaleAccepted,
		StaleRejected: c.StaleRejected, LostUpdates: c.LostUpdates, TokenRegressions: c.TokenRegressions,
		OverlapsLockBug: c.OverlapsLockBug, OverlapsExpired: c.OverlapsExpiredHolder, OverlapsAmbiguous: c.OverlapsAmbiguous,
		Incidents: c.Incidents, IncidentsLockBug: c.IncidentsLockBug, IncidentsExpired: c.IncidentsExpiredHolder,
		IncidentsAmbiguous: c.IncidentsAmbiguous,
		LeaseEnds:          c.LeaseEnds, StaleTold: c.StaleTold, StaleSilent: c.StaleSilent,
		ValidityShort: c.ValidityShort, ValidityLong: c.ValidityLong,
		ValidityShortMaxMS: c.ValidityShortMaxMS, ValidityLongMaxMS: c.ValidityLongMaxMS,
	}
	tested, judged := c.Tested()
	t.Injections, t.Unjudged = int64(max(tested, 0)), !judged && c.Injections > 0
	t.Untested = int64(max(c.Injections-tested, 0))
	for _, tg := range c.Targets {
		if !tg.Counted() {
			t.WhyNot = appendNew(t.WhyNot, orUnset(tg.WhyNot, "no reason recorded"))
		}
	}
	if c.Injections == 0 && classOf(c) != faultNone && len(c.FaultWindows) > 0 {
		t.Injections, t.InjectionsInferred = int64(len(c.FaultWindows)), true
	}
	if t.Incidents == 0 && t.Overlaps > 0 {
		t.Incidents = 1
		switch {
		case t.OverlapsLockBug > 0:
			t.IncidentsLockBug = 1
		case t.OverlapsExpired == t.Overlaps:
			t.IncidentsExpired = 1
		}
	}
	t.IncidentsUnclassified = max(t.Incidents-t.IncidentsLockBug-t.IncidentsExpired-t.IncidentsAmbiguous, 0)
	t.Hit = hitsOf(c, t)
	return t
}

// hitsOf counts the injections of a case that enter rates and are
// charged with at least one event of each kind (results.Target's
// counts). A case whose targets carry no such count for a kind it has
// events of (a file from before them, or no targets at all) is taken to
// have had them in as many injections as it has events, at most all: the
// bound cannot then be smaller than the truth.
func hitsOf(c *results.Case, t tally) hits {
	var h, sum hits
	for _, tg := range c.Targets {
		expired := tg.Incidents - tg.IncidentsLockBug - tg.IncidentsAmbiguous
		sum.add(hits{Incident: tg.Incidents, LockBug: tg.IncidentsLockBug, Ambiguous: tg.IncidentsAmbiguous, Expired: expired,
			Stale: tg.StaleAccepted})
		if !tg.Counted() {
			continue
		}
		h.add(hits{Incident: b64(tg.Incidents > 0), LockBug: b64(tg.IncidentsLockBug > 0), Ambiguous: b64(tg.IncidentsAmbiguous > 0),
			Expired: b64(expired > 0), Stale: b64(tg.StaleAccepted > 0)})
	}
	fill := func(k *int64, charged, events int64) {
		if charged == 0 && events > 0 {
			*k = min(events, t.Injections)
		}
	}
	fill(&h.Incident, sum.Incident, t.Incidents)
	fill(&h.LockBug, sum.LockBug, t.lockBugs())
	fill(&h.Ambiguous, sum.Ambiguous, t.IncidentsAmbiguous)
	fill(&h.Expired, sum.Expired, t.IncidentsExpired)
	fill(&h.Stale, sum.Stale, t.StaleAccepted)
	return h
}

func b64(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// verdicts counts checker verdicts over cases, with the reasons given
// for the unknown ones and for the false ones. Empty counts the histories
// with no grant to check (results.NoGrant): not a pass, and not a check
// that failed to settle either — a trial that granted nothing (a 0.5 s
// throughput trial whose one acquire was still waiting at its end) shows
// nothing about the lock's safety, and does not disqualify it.
type verdicts struct {
	True, False, Unknown, Unchecked, Empty int
	Reasons, FalseReasons                  []string
}

func (v *verdicts) add(x results.Verdict, reason string) {
	if x == results.Unknown && reason == results.NoGrant {
		v.Empty++
		return
	}
	switch x {
	case results.Linearizable:
		v.True++
	case results.NotLinearizable:
		v.False++
	case results.Unknown:
		v.Unknown++
	default:
		v.Unchecked++
	}
	switch {
	case reason == "":
	case x == results.NotLinearizable:
		v.FalseReasons = appendNew(v.FalseReasons, reason)
	case x != results.Linearizable:
		v.Reasons = appendNew(v.Reasons, reason)
	}
}

func (v *verdicts) merge(u verdicts) {
	v.True += u.True
	v.False += u.False
	v.Unknown += u.Unknown
	v.Unchecked += u.Unchecked
	v.Empty += u.Empty
	for _, r := range u.Reasons {
		v.Reasons = appendNew(v.Reasons, r)
	}
	for _, r := range u.FalseReasons {
		v.FalseReasons = appendNew(v.FalseReasons, r)
	}
}

// String is "true ×2, false ×1", or "not checked".
func (v verdicts) String() string {
	var parts []string
	for _, x := range []struct {
		n    int
		what string
	}{{v.True, "true"}, {v.False, "false"}, {v.Unknown, "unknown"}, {v.Empty, "no grant to check"}} {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", x.what, x.n))
		}
	}
	if len(parts) == 0 {
		return "not checked"
	}
	return joinAnd(parts)
}

// withReasons is String followed by the reasons given.
func (v verdicts) withReasons() string {
	s := v.String()
	if rs := append(slices.Clone(v.FalseReasons), v.Reasons...); len(rs) > 0 {
		s += ": " + brief(rs)
	}
	return s
}

// inFaultShares is a run's in-fault grant rate as shares of its
// baseline: one per fault window when the run recorded them (an
// injection is a sample), else one for all its windows together.
func inFaultShares(av *results.Availability) []float64 {
	if av.BaselineThroughput <= 0 {
		return nil
	}
	var out []float64
	for _, w := range av.WindowThroughput {
		if validFloat(w) {
			out = append(out, w/av.BaselineThroughput)
		}
	}
	if len(out) == 0 && validFloat(av.InFaultThroughput) {
		out = append(out, av.InFaultThroughput/av.BaselineThroughput)
	}
	return out
}
