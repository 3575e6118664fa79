package results

import (
	"errors"
	"fmt"
	"math"
)

// Envelope is where one lock breaks under one fault family: the points a
// search on the fault's size probed (lockbench envelope), each a count of
// tested injections with what followed them, and the boundaries the
// search drew from them.
type Envelope struct {
	// Backend is the backend's spec (redlock, postgres?mode=lease).
	Backend string `json:"backend"`
	// Family names the fault family (client-pause, clock-jump,
	// clock-jump-minority); Fault is its fault spec without the size
	// (clock-jump?nodes=minority) and Param the size's param (x, by).
	Family string `json:"family"`
	Fault  string `json:"fault"`
	Param  string `json:"param"`
	// Offset is added to a size to make Param's value: a clock rate is 1
	// + the key lifetimes it gains per key lifetime. Zero when Param is
	// the size.
	Offset float64 `json:"offset,omitempty"`
	// Unit says what a size of 1 is ("lease", "key lifetime").
	Unit string `json:"unit"`
	// Mechanism is what the debate names as the way this family breaks a
	// lock, for the report to explain a boundary with.
	Mechanism string `json:"mechanism,omitempty"`
	// LeaseMS is the lease (or key lifetime) a size of 1 stands for, in
	// ms, on this run's TTL.
	LeaseMS float64 `json:"lease_ms"`
	// MinSize and MaxSize are the range searched, in Units.
	MinSize float64 `json:"min_size"`
	MaxSize float64 `json:"max_size"`
	// Resolution is the ratio between neighbouring sizes of the search's
	// grid: a boundary is found to within this factor.
	Resolution float64 `json:"resolution"`
	// Points are the sizes probed, in ascending size (a size probed twice
	// holds both probes' counts).
	Points []EnvelopePoint `json:"points"`
	// Boundaries are one per event the search looked for: lock bugs, and
	// late writes under each guard.
	Boundaries []Boundary `json:"boundaries"`
	// Edge, when the largest sizes tested nothing, is where the fault
	// stops being a test: past it, it outlasts whatever it could break (a
	// restart delayed past every open section, a failover past the
	// sections lost with the master), and no rate is drawn there.
	Edge *TestedEdge `json:"tested_edge,omitempty"`
	// Notes say what the search met: its budget ran out, a probe failed.
	Notes []string `json:"notes,omitempty"`
}

// TestedEdge is the largest size whose injections tested (Last, with its
// tested injections) and the smallest size above it where none of two
// probes' did (Untested).
type TestedEdge struct {
	Last       float64 `json:"last"`
	LastTested int     `json:"last_tested"`
	Untested   float64 `json:"untested"`
}

// Describe says the edge in a line: "tested up to 0.71 leases (3 tested
// injections there); from 0.84 on none did: the fault outlasted what it
// could break".
func (t TestedEdge) Describe(unit string) string {
	return fmt.Sprintf("tested up to %g %ss (%d tested injections there); from %g on none did: the fault outlasted "+
		"what it could break", t.Last, unit, t.LastTested, t.Untested)
}

// EnvelopePoint is one size a search probed: its tested injections and
// how many of them were followed by a lock bug, and by a late write under
// each guard.
type EnvelopePoint struct {
	// Size is the fault's size in Envelope.Units.
	Size float64 `json:"size"`
	// Tested counts the tested injections; Injections every injection
	// made (an untested one enters no rate).
	Tested     int `json:"tested"`
	Injections int `json:"injections"`
	// LockBugs counts the tested injections followed by at least one
	// lock-bug incident.
	LockBugs int `json:"lock_bugs"`
	// LateWrites counts, per guard, the tested injections followed by a
	// stale write the resource accepted under that guard.
	LateWrites map[string]int `json:"late_writes,omitempty"`
	// Seeds are the runner seeds of the probes behind the point, and
	// Replay the command lines that replay them (lockbench run --seed).
	Seeds  []uint64 `json:"seeds"`
	Replay []string `json:"replay,omitempty"`
	// Histories are the paths, relative to the run dir, of the histories
	// of the point's cases (lockbench check re-judges them).
	Histories []string `json:"histories,omitempty"`
	// Invalid says why a probe measured nothing (its fault failed to
	// inject, its servers would not start).
	Invalid string `json:"invalid,omitempty"`
}

// Event is what a boundary is drawn for: EventLockBug, or a late write
// under a guard ("late-write:none").
const EventLockBug = "lock-bug"

// LateWriteEvent names the late writes a guard let in, as a Boundary's
// Event.
func LateWriteEvent(guard string) string { return "late-write:" + guard }

// Count returns the point's tested injections followed by event.
func (p EnvelopePoint) Count(event string) int {
	if event == EventLockBug {
		return p.LockBugs
	}
	for g, k := range p.LateWrites {
		if LateWriteEvent(g) == event {
			return k
		}
	}
	return 0
}

// Boundary is where one event starts, as the points show it: the largest
// size with none in its tested injections, below the smallest size with
// one.
type Boundary struct {
	Event string `json:"event"`
	// Safe is the largest size probed with no event in its tested
	// injections below every size with one (0 when even the smallest size
	// showed one); SafeTested is its tested injections and SafeUpper95
	// the exact one-sided 95% upper bound on the event's rate there.
	Safe        float64 `json:"safe"`
	SafeTested  int     `json:"safe_tested"`
	SafeUpper95 float64 `json:"safe_upper95"`
	// First is the smallest size probed with the event (0 when none was
	// seen: None); FirstCount of FirstTested injections there.
	First       float64 `json:"first,omitempty"`
	FirstCount  int     `json:"first_count,omitempty"`
	FirstTested int     `json:"first_tested,omitempty"`
	// None is set when no probed size showed the event: "none up to
	// Safe", the largest size tried.
	None bool `json:"none,omitempty"`
	// Resolved is set when First/Safe is within the search's resolution;
	// otherwise the budget ran out with the boundary bracketed wider.
	Resolved bool `json:"resolved,omitempty"`
}

// Check returns an error naming each bad value of e: a size that is not
// a positive number, counts that contradict each other, boundaries out of
// the searched range. Read checks every envelope a file holds.
func (e Envelope) Check() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("envelope %s/%s: "+format, append([]any{e.Backend, e.Family}, args...)...))
	}
	pos := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
	if !pos(e.MinSize) || !pos(e.MaxSize) || e.MinSize > e.MaxSize {
		bad("sizes %v–%v: want 0 < min ≤ max", e.MinSize, e.MaxSize)
	}
	if !pos(e.Resolution) || e.Resolution <= 1 {
		bad("resolution %v: want a ratio above 1", e.Resolution)
	}
	if math.IsNaN(e.LeaseMS) || math.IsInf(e.LeaseMS, 0) || e.LeaseMS < 0 {
		bad("lease %v ms", e.LeaseMS)
	}
	for i, p := range e.Points {
		if !pos(p.Size) {
			bad("point %d: size %v", i, p.Size)
		}
		if p.Tested < 0 || p.Injections < p.Tested || p.LockBugs < 0 || p.LockBugs > p.Tested {
			bad("point %d: %d lock bugs in %d tested of %d injections", i, p.LockBugs, p.Tested, p.Injections)
		}
		for g, k := range p.LateWrites {
			if k < 0 || k > p.Tested {
				bad("point %d: %d late writes under %s in %d tested", i, k, g, p.Tested)
			}
		}
	}
	if t := e.Edge; t != nil && (!pos(t.Last) || t.Untested <= t.Last || math.IsInf(t.Untested, 0) || t.LastTested < 1) {
		bad("tested edge: %d tested at %v, none from %v", t.LastTested, t.Last, t.Untested)
	}
	for _, b := range e.Boundaries {
		for _, v := range []float64{b.Safe, b.First} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				bad("boundary %s: size %v", b.Event, v)
			}
		}
		if b.SafeUpper95 < 0 || b.SafeUpper95 > 1 || math.IsNaN(b.SafeUpper95) {
			bad("boundary %s: bound %v", b.Event, b.SafeUpper95)
		}
		if b.SafeTested < 0 || b.FirstTested < 0 || b.FirstCount < 0 || b.FirstCount > b.FirstTested {
			bad("boundary %s: %d of %d tested at its first size, %d tested at its safe end", b.Event, b.FirstCount, b.FirstTested, b.SafeTested)
		}
	}
	return errors.Join(errs...)
}

// Describe says a boundary in a line: "lock bugs: none in 8 tested up to
// 2 key lifetimes (≤ 31%)", "late-write:none: first at 1.19 leases (2 of
// 4), none in 8 at 1 (≤ 31%)".
func (b Boundary) Describe(unit string) string {
	switch {
	case b.None:
		return fmt.Sprintf("%s: none up to %g %ss, the largest tried (0 in %d tested, rate ≤ %.0f%%)",
			b.Event, b.Safe, unit, b.SafeTested, 100*b.SafeUpper95)
	case b.First == 0:
		return fmt.Sprintf("%s: not probed", b.Event)
	case b.SafeTested == 0 && b.Resolved:
		return fmt.Sprintf("%s: already at %g %ss, the smallest size of the search (%d of %d tested)",
			b.Event, b.First, unit, b.FirstCount, b.FirstTested)
	case b.SafeTested == 0:
		return fmt.Sprintf("%s: seen at %g %ss (%d of %d tested); no smaller size probed within the budget",
			b.Event, b.First, unit, b.FirstCount, b.FirstTested)
	}
	res := ""
	if !b.Resolved {
		res = "; not resolved within the budget"
	}
	return fmt.Sprintf("%s: first at %g %ss (%d of %d tested); none at %g (0 in %d, rate ≤ %.0f%%)%s",
		b.Event, b.First, unit, b.FirstCount, b.FirstTested, b.Safe, b.SafeTested, 100*b.SafeUpper95, res)
}
