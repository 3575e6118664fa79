package answer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// The names the decision reads in cases.
const (
	faultNone    = "none"
	classPause   = "client-pause"
	workloadHot  = "hot"
	guardNone    = "none"
	guardFence   = "fence"
	guardFenceRW = "fence-rw"
)

// evidence is what the decision knows of every backend of a run.
type evidence struct {
	backends map[string]*backend
	// names are the backends in the order of the file.
	names []string
	// classes are every fault class some backend faced (tested or not),
	// in the order first seen.
	classes []string
	// workload and durability are the reference speeds are compared on.
	workload, durability string
	skipped              []results.Skip
	// unrun are the backends of cut cases only, by name: none of their
	// planned cases ran.
	unrun map[string]*backend
}

// backend is the evidence of one backend.
type backend struct {
	name, kind string
	control    bool
	nodes      int
	// valid counts its valid cases; invalid its cases whose fault failed
	// to inject.
	valid, invalid int
	// free is what it did without faults.
	free freeEvidence
	// classes holds its evidence per fault class (and durability profile).
	classes map[string]*classEvidence
	// fenced holds what the resource let through per guard, over every
	// valid case run under that guard.
	guards map[string]*guardEvidence
	// speeds are its fault-free throughputs per trial on the reference
	// workload, and independent says they come from fresh servers each.
	speeds      []float64
	independent bool
	peakClients int
	// cut are the fault specs of its planned cases the run stopped
	// before (results.Skip.Cut).
	cut []string
}

// freeEvidence is a backend's fault-free record.
type freeEvidence struct {
	cases                      int
	maxClients                 int
	acquired, contended        int64
	incidents, lockBugs        int64
	staleAccepted, lostUpdates int64
	tokenRegressions           int64
	// seconds is how long its fault-free cases ran, for estimates.
	seconds float64
}

// classEvidence is a backend's record under one fault class and profile.
type classEvidence struct {
	class, profile string
	// tested are the tested injections (those of invalid cases
	// included: a lock bug seen is never erased), lockBug those followed
	// by a lock bug, expired by an expired holder only, ambiguous by an
	// ambiguous incident.
	tested, lockBug, expired, ambiguous int64
	// untested counts injections that tested nothing, why the reasons.
	untested int64
	why      []string
	// fromInvalid counts the tested injections kept from invalid cases.
	fromInvalid int64
	// share and recovery are availability samples (valid cases only):
	// per fault window, grants as a share of the baseline and the
	// seconds to recover (+Inf when it did not).
	share, recovery []float64
	// seconds is how long its cases ran, for estimates of more.
	seconds float64
}

// label names the class with its profile: "restart (fast)".
func (c *classEvidence) label() string {
	if c.profile == "" {
		return c.class
	}
	return c.class + " (" + c.profile + ")"
}

// bugRate is the lock-bug rate of the class.
func (c *classEvidence) bugRate() stats.Rate { return stats.Rate{K: c.lockBug, N: c.tested} }

// guardEvidence is what the resource let through under one guard.
type guardEvidence struct {
	cases                                            int
	fencing                                          bool
	staleAccepted, lostUpdates, tokenRegressions     int64
	staleClasses                                     []string
	fencedFalse, fencedUnknown, fencedTrue, noGrants int
	reasons                                          []string
	classes                                          map[string]int64 // tested injections per class
}

// classOf is a case's fault class: its FaultClass, or its fault's name
// without params.
func classOf(c *results.Case) string {
	if c.FaultClass != "" {
		return c.FaultClass
	}
	name, _, _ := strings.Cut(c.Fault, "?")
	if name == "" {
		return faultNone
	}
	return name
}

// guardOf is a case's guard.
func guardOf(c *results.Case) string {
	switch {
	case c.Guard != "":
		return c.Guard
	case c.Fencing:
		return guardFence
	}
	return guardNone
}

// runOf names the run of the lock behind a case: the runner judges one
// run's writes under several guards and writes a case per guard, all
// pointing at the run's history. What the lock did is counted once per
// run.
func runOf(c *results.Case) string {
	if c.History != "" {
		return fmt.Sprintf("history %s|%s|%s", c.History, c.Host, c.Durability)
	}
	return fmt.Sprintf("case %s|%d|%s|%s", c.Key(), c.Trial, c.Host, c.Guard)
}

// gather reads the evidence of f.
func gather(f *results.File) *evidence {
	ev := &evidence{backends: map[string]*backend{}, unrun: map[string]*backend{}, skipped: f.Skipped}
	invalidRuns := map[string]bool{}
	for i := range f.Cases {
		if c := &f.Cases[i]; c.Invalid {
			invalidRuns[runOf(c)] = true
		}
	}
	seenRun := map[string]bool{}
	for i := range f.Cases {
		c := &f.Cases[i]
		b := ev.backend(c)
		cls := classOf(c)
		invalid := c.Invalid || invalidRuns[runOf(c)]
		if invalid {
			b.invalid++
		} else {
			b.valid++
		}
		// A mixed schedule's injections are evidence of their own classes,
		// never pooled: each class's are counted apart (results.Case.ByClass).
		views := c.ByClass()
		if cls != faultNone && len(views) == 1 && !slices.Contains(ev.classes, cls) {
			ev.classes = append(ev.classes, cls)
		}
		first := !seenRun[runOf(c)]
		seenRun[runOf(c)] = true
		if cls == faultNone {
			if !invalid {
				b.addFree(c, first)
				b.addGuard(c, cls, 0)
			}
			continue
		}
		tested := 0
		for _, v := range views {
			vc := classOf(v)
			if len(views) > 1 && !slices.Contains(ev.classes, vc) {
				ev.classes = append(ev.classes, vc)
			}
			ce := b.class(vc, c.Durability)
			if first {
				tested += ce.addInjections(v, invalid)
			} else {
				tested += countTested(v, invalid)
			}
			if !invalid && first && len(views) == 1 {
				ce.addAvailability(c.Availability)
			}
		}
		if !invalid {
			b.addGuard(c, cls, tested)
		}
	}
	ev.reference(f)
	for _, b := range ev.backends {
		b.addSpeeds(f, ev.workload, ev.durability, invalidRuns)
	}
	// A case cut (by the run's end, or left out of round 1 for the
	// budget) is missing until a later round runs its spec.
	ran := map[[2]string]bool{}
	for _, c := range f.Cases {
		ran[[2]string{c.Backend, c.Fault}] = true
	}
	for _, s := range f.Skipped {
		if !s.Cut || ran[[2]string{s.Backend, s.Fault}] {
			continue
		}
		b := ev.backends[s.Backend]
		if b == nil {
			// Every case of it was cut: a profile that names it as a
			// candidate finds it planned, never judged (candidates).
			b = ev.unrun[s.Backend]
			if b == nil {
				b = &backend{name: s.Backend, kind: s.ServerKind, classes: map[string]*classEvidence{}, guards: map[string]*guardEvidence{}}
				ev.unrun[s.Backend] = b
			}
		}
		if !slices.Contains(b.cut, s.Fault) {
			b.cut = append(b.cut, s.Fault)
		}
	}
	return ev
}

// backend returns the evidence of c's backend, creating it.
func (ev *evidence) backend(c *results.Case) *backend {
	b := ev.backends[c.Backend]
	if b == nil {
		b = &backend{name: c.Backend, classes: map[string]*classEvidence{}, guards: map[string]*guardEvidence{}}
		ev.backends[c.Backend] = b
		ev.names = append(ev.names, c.Backend)
	}
	b.control = b.control || c.Control
	b.nodes = max(b.nodes, c.Nodes)
	if b.kind == "" {
		b.kind = c.ServerKind
	}
	return b
}

// class returns the evidence of a class and profile, creating it.
func (b *backend) class(cls, profile string) *classEvidence {
	k := cls + "|" + profile
	ce := b.classes[k]
	if ce == nil {
		ce = &classEvidence{class: cls, profile: profile}
		b.classes[k] = ce
	}
	return ce
}

// addFree adds a fault-free case.
func (b *backend) addFree(c *results.Case, first bool) {
	f := &b.free
	f.cases++
	f.seconds += max(c.DurationS, 0)
	f.maxClients = max(f.maxClients, c.Clients)
	if first {
		f.acquired += c.Acquired
		f.contended += c.ContendedGrants
		f.incidents += max(c.Incidents, min(c.Overlaps, 1))
		f.lockBugs += lockBugs(c)
		f.tokenRegressions += c.TokenRegressions
	}
	f.staleAccepted += c.StaleAccepted
	f.lostUpdates += c.LostUpdates
}

// lockBugs counts a case's lock-bug incidents: those classified so, and
// those the judge did not classify (nothing shows they were not).
func lockBugs(c *results.Case) int64 {
	if c.Incidents == 0 && c.Overlaps > 0 { // a file from before the judge
		if c.OverlapsExpiredHolder == c.Overlaps {
			return 0
		}
		return 1
	}
	return c.IncidentsLockBug + max(c.Incidents-c.IncidentsLockBug-c.IncidentsExpiredHolder-c.IncidentsAmbiguous, 0)
}

// countTested counts the injections of c that enter rates: its tested
// targets, or for a valid case without targets its tested count. An
// invalid case keeps only the injections its targets say were tested.
func countTested(c *results.Case, invalid bool) int {
	if len(c.Targets) > 0 {
		n := 0
		for _, t := range c.Targets {
			if t.Counted() && (!invalid || t.Tested != nil) {
				n++
			}
		}
		return n
	}
	if invalid {
		return 0
	}
	n, _ := c.Tested()
	return max(n, 0)
}

// addInjections adds the injections of c (the first case of its run) and
// what followed each, returning the tested ones. An invalid case keeps
// the findings of its tested injections: only what was not tested drops
// out.
func (ce *classEvidence) addInjections(c *results.Case, invalid bool) int {
	ce.seconds += max(c.DurationS, 0)
	if len(c.Targets) == 0 {
		if invalid {
			ce.why = appendNew(ce.why, "the case was invalid and recorded no injection of its own")
			ce.untested += int64(c.Injections)
			return 0
		}
		n := countTested(c, false)
		ce.tested += int64(n)
		ce.untested += int64(max(c.Injections-n, 0))
		bugs := lockBugs(c)
		ce.lockBug += min(bugs, int64(n))
		ce.ambiguous += min(c.IncidentsAmbiguous, int64(n))
		if bugs == 0 && c.IncidentsAmbiguous == 0 {
			ce.expired += min(c.IncidentsExpiredHolder, int64(n))
		}
		return n
	}
	n := 0
	var bug, amb, exp, charged int64
	for _, t := range c.Targets {
		charged += t.Incidents
		if !t.Counted() || (invalid && t.Tested == nil) {
			// An invalid case's injection counts only when the run judged
			// it tested: one of them failed, and nothing says which.
			ce.untested++
			why := t.WhyNot
			if invalid && t.Tested == nil {
				why = "its case was invalid (" + cmp.Or(c.InvalidReason, "no reason recorded") +
					") and the run did not judge which injection tested anything"
			}
			ce.why = appendNew(ce.why, cmp.Or(why, "no reason recorded"))
			continue
		}
		n++
		switch {
		case t.IncidentsLockBug > 0:
			bug++
		case t.IncidentsAmbiguous > 0:
			amb++
		case t.Incidents > 0:
			exp++
		}
	}
	if charged == 0 && c.Incidents+c.Overlaps > 0 && !invalid {
		// Targets that charge nobody (a file from before their counts):
		// the case's incidents followed as many of its tested injections,
		// at most all — the bound cannot then be smaller than the truth.
		// In an invalid case they may have followed the injection that
		// failed, and are not charged.
		bug = min(lockBugs(c), int64(n))
		amb = min(c.IncidentsAmbiguous, int64(n)-bug)
		exp = min(c.IncidentsExpiredHolder, int64(n)-bug-amb)
	}
	ce.lockBug, ce.ambiguous, ce.expired = ce.lockBug+bug, ce.ambiguous+amb, ce.expired+exp
	ce.tested += int64(n)
	if invalid {
		ce.fromInvalid += int64(n)
	}
	return n
}

// addAvailability adds a case's availability samples.
func (ce *classEvidence) addAvailability(av *results.Availability) {
	if av == nil || !(av.BaselineThroughput > 0) {
		return
	}
	var shares []float64
	for _, w := range av.WindowThroughput {
		if !math.IsNaN(w) && !math.IsInf(w, 0) {
			shares = append(shares, w/av.BaselineThroughput)
		}
	}
	if len(shares) == 0 && !math.IsNaN(av.InFaultThroughput) {
		shares = append(shares, av.InFaultThroughput/av.BaselineThroughput)
	}
	ce.share = append(ce.share, shares...)
	for _, r := range av.RecoveryS {
		if r < 0 {
			r = math.Inf(1)
		}
		ce.recovery = append(ce.recovery, r)
	}
}

// addGuard adds what the resource let through under c's guard.
func (b *backend) addGuard(c *results.Case, cls string, tested int) {
	g := b.guards[guardOf(c)]
	if g == nil {
		g = &guardEvidence{classes: map[string]int64{}}
		b.guards[guardOf(c)] = g
	}
	g.cases++
	g.fencing = g.fencing || c.Fencing
	g.staleAccepted += c.StaleAccepted
	g.lostUpdates += c.LostUpdates
	g.tokenRegressions += c.TokenRegressions
	if c.StaleAccepted+c.LostUpdates+c.TokenRegressions > 0 {
		g.staleClasses = appendNew(g.staleClasses, cls)
	}
	g.classes[cls] += int64(tested)
	switch {
	case c.LinearizableFenced == results.Linearizable:
		g.fencedTrue++
	case c.LinearizableFenced == results.NotLinearizable:
		g.fencedFalse++
		g.reasons = appendNew(g.reasons, c.LinearizableFencedReason)
	case c.LinearizableFencedReason == results.NoGrant:
		g.noGrants++
	default:
		g.fencedUnknown++
		g.reasons = appendNew(g.reasons, cmp.Or(c.LinearizableFencedReason, "not checked"))
	}
}

// appendNew appends v unless s holds it or it is empty.
func appendNew(s []string, v string) []string {
	if v == "" || slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// sortedClasses returns the backend's class evidence in a stable order.
func (b *backend) sortedClasses() []*classEvidence {
	out := make([]*classEvidence, 0, len(b.classes))
	for _, ce := range b.classes {
		out = append(out, ce)
	}
	slices.SortFunc(out, func(x, y *classEvidence) int {
		return cmp.Or(cmp.Compare(x.class, y.class), cmp.Compare(x.profile, y.profile))
	})
	return out
}

// median is the median of the backend's speeds (0 without any).
func (b *backend) median() float64 { return stats.SpreadOf(b.speeds).Median }
