package results

import "slices"

// Target is what one injection of a fault hit.
type Target struct {
	// Injection numbers the injection within its case, from 1.
	Injection int `json:"injection"`
	// Nodes names the servers (or client processes) hit.
	Nodes []string `json:"nodes"`
	// Hosts names the host each of Nodes runs on, in the same order, when
	// the run spans several hosts (lockbench run --inventory); nil when
	// everything ran on this machine.
	Hosts []string `json:"hosts,omitempty"`
	// Leader is set when the leader of a ZooKeeper or etcd cluster (or the
	// master of a Sentinel set) was among them; Priority when a Redlock
	// priority node was.
	Leader   bool `json:"leader,omitempty"`
	Priority bool `json:"priority,omitempty"`
	// Class is, for an injection of a mixed schedule, the fault class it
	// belongs to ("server-pause", "restart+partition" for a composed
	// pair): its rates and bounds are counted per class, never pooled
	// with the schedule's others. Empty when it is the case's FaultClass.
	Class string `json:"class,omitempty"`
	// Tested says whether the injection met what its class is meant to
	// test (a section of the faulted keys active at the strike, the lock
	// granting just before it) and had its effect read back from the
	// servers; WhyNot says why not. Nil when the run did not judge its
	// injections: it then counts as tested, and the report says so.
	Tested *bool  `json:"tested,omitempty"`
	WhyNot string `json:"why_not,omitempty"`
	// Precondition says what the injection met at its strike, as the
	// judge saw it: the section open on the faulted key, the last grant
	// before it.
	Precondition string `json:"precondition,omitempty"`
	// Effect says what the fault did, as read back from the servers (or
	// the client processes) after it struck: keys kept or lost, the clock
	// moved, threads stopped, a member cut off from its peers.
	Effect string `json:"effect,omitempty"`
	// Aimed and Landed are, for a pause of a client's process, the point
	// of its cycle it was aimed at and the one it landed at (see
	// Case.PausesLanded; "after-read+extend" when it also caught an
	// extension in flight); one that missed its point is not tested.
	Aimed  string `json:"aimed,omitempty"`
	Landed string `json:"landed,omitempty"`
	// AtS is when the injection struck, in seconds from the start of the
	// case. Incidents, IncidentsLockBug, IncidentsAmbiguous and
	// StaleAccepted count what began from then until the next injection
	// (or the end of the case): what the injection is charged with.
	AtS                float64 `json:"at_s"`
	Incidents          int64   `json:"incidents"`
	IncidentsLockBug   int64   `json:"incidents_lock_bug"`
	IncidentsAmbiguous int64   `json:"incidents_ambiguous"`
	StaleAccepted      int64   `json:"stale_accepted"`
}

// ByClass returns c as the classes of its injections see it: for a case
// whose injections record a class of their own (a mixed schedule), one
// view per class, in the order the classes first struck, each with that
// class as its FaultClass and only that class's injections (Injections
// and InjectionsTested counted from them), so that rates and bounds stay
// per class; otherwise c alone. The views share c's other fields: what
// a case counts as a whole (its guards' stale writes, its verdicts) is
// the whole schedule's.
func (c *Case) ByClass() []*Case {
	var order []string
	for _, t := range c.Targets {
		if t.Class == "" {
			return []*Case{c}
		}
		if !slices.Contains(order, t.Class) {
			order = append(order, t.Class)
		}
	}
	if len(order) == 0 {
		return []*Case{c}
	}
	out := make([]*Case, len(order))
	for i, cls := range order {
		v := *c
		v.FaultClass, v.Targets = cls, nil
		tested := 0
		for _, t := range c.Targets {
			if t.Class == cls {
				v.Targets = append(v.Targets, t)
				if t.Counted() {
					tested++
				}
			}
		}
		v.Injections = len(v.Targets)
		if c.InjectionsTested != nil {
			v.InjectionsTested = &tested
		}
		out[i] = &v
	}
	return out
}

// Counted reports whether the injection enters rates and bounds: it was
// tested, or the run did not judge its injections.
func (t Target) Counted() bool { return t.Tested == nil || *t.Tested }

// Tested returns the case's tested injections and whether the run judged
// them: InjectionsTested when recorded, else every injection (unjudged).
func (c *Case) Tested() (n int, judged bool) {
	if c.InjectionsTested != nil {
		return *c.InjectionsTested, true
	}
	return c.Injections, false
}
