package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Report is what the overlap counter found in a history. Every count is
// defined on the judge's order of events (see the package doc for why
// that order cannot invent a violation):
//
//   - Overlaps: sections granted while another section of the same key
//     was active (granted, not yet ended). Each section counts at most
//     once, when it is granted; three sections of a key active at once
//     count 2.
//   - Each overlap is judged against the lock's contract (see Class):
//     OverlapsLockBug when the new grant certainly came before some
//     active section's contract line (the earlier grant's call plus the
//     Promise its backend declares: the lock granted a key it had
//     promised to someone else), OverlapsExpiredHolder when it certainly
//     came after every active section's line (what fencing is for),
//     OverlapsAmbiguous when the clock bounds do not tell. They add up
//     to Overlaps. What the leases themselves reported does not move the
//     line; an extension the lock granted does: each ok Extend of an
//     active section called before the new section ended draws a line of
//     its own (its call plus its Promise), and one called after the new
//     grant returned is a lock bug by that rule — the lock promised the
//     key to two holders at once.
//   - Incidents: episodes of two holders at once: an incident begins with
//     an overlap and lasts until no section of the key is active but its
//     newest grant (every holder a later grant overtook is gone), taking
//     in every section granted meanwhile (a paused holder overtaken by a
//     hundred grants is one incident, and a holder that outlives the
//     paused one and is paused in its turn starts another); its class is
//     its worst overlap's. Overlaps grow with throughput; incidents grow
//     with failures. Episodes lists them.
//   - StaleAccepted / StaleRejected: writes made by a superseded holder —
//     after a later section of the key was granted — that the resource
//     accepted / rejected.
//   - LostUpdates: accepted writes minus the final counters: increments a
//     concurrent writer overwrote.
//   - TokenRegressions: grants whose token is not above the token of the
//     key's previous grant that carried one, in grant order.
//   - RejectedCurrent: rejected writes of holders that had not been
//     superseded (their token was below one the resource had seen): safe,
//     but work lost.
//   - Unfenced: writes without a token under a fencing guard, which the
//     resource could not check.
//   - LeaseEnds: sections whose lease told its holder it had ended
//     (a LeaseEnd op) before the holder ended the section.
//     StaleTold / StaleSilent split the stale writes (accepted or
//     rejected): made after the holder's lease had told it so — a careful
//     client would have held back — or with its lease saying nothing,
//     which only a fencing resource can stop.
//   - ContendedGrants: grants made while another client's acquire of the
//     same key was in progress (invoked, not yet returned): the grants at
//     which a double grant could show.
//   - ValidityShort / ValidityLong: grants and extensions whose lease
//     reported a ValidUntil before the call plus its Promise (less than
//     its lock promised) / after the return plus its MaxValidity (more
//     than its lock can give), on the client's own clock;
//     ValidityShortMax and ValidityLongMax are the largest departures
//     (ns).
//   - Extends / ExtendsFailed: extensions of the sections' leases
//     reported, and those the lock refused (the key was no longer the
//     lease's) or whose outcome is unknown, but for those that returned
//     after their holder began to release: they raced the release.
//   - Pauses: where each pause of a client's process landed (Landings).
type Report struct {
	Sections, Writes, Accepted                                  int64
	Overlaps, OverlapsLockBug, OverlapsExpiredHolder            int64
	OverlapsAmbiguous                                           int64
	Incidents, IncidentsLockBug, IncidentsExpiredHolder         int64
	IncidentsAmbiguous                                          int64
	StaleAccepted, StaleRejected, LostUpdates, TokenRegressions int64
	RejectedCurrent, Unfenced                                   int64
	LeaseEnds, StaleTold, StaleSilent                           int64
	ContendedGrants                                             int64
	ValidityShort, ValidityLong                                 int64
	ValidityShortMax, ValidityLongMax                           int64
	Extends, ExtendsFailed                                      int64
	// AmbiguousWidthMax is the widest uncertainty (ns) of an overlap the
	// clock bounds left undecided: how long the span the contract line
	// may lie in and the span the later grant may have returned in are,
	// together (ambiguousWidth). OverlapsAmbiguousWide counts the
	// overlaps whose width exceeded the round trips that bound an
	// overlap in this history (RoundTrip, twice: the earlier grant's and
	// the later's): a report delayed far beyond what the case's other
	// reports took leaves room for a lock bug, so such an overlap counts
	// against the lock, as a lock bug (OverlapsLockBug includes them).
	AmbiguousWidthMax, OverlapsAmbiguousWide int64
	// RoundTrip is the median, over the history's granted acquires, of
	// the time the judge's bounds add to the call (its receipt of the
	// grant less its Invoke less the call's own duration): the round trip
	// to the judge that bounds a grant (ns).
	RoundTrip int64
	// Pauses are the landings of the pauses of client processes, in the
	// order they were asked.
	Pauses []Landing `json:",omitempty"`
	// Episodes are the incidents in the order they began, with their
	// class, for attributing them to fault injections.
	Episodes []Episode `json:",omitempty"`
	// StaleAcceptedAt are the times of the stale writes accepted (judge
	// ns since the case start), in order, for attributing them to fault
	// injections.
	StaleAcceptedAt []int64 `json:",omitempty"`
	// Grants counts the sections of each key.
	Grants map[string]int64
	// Examples describe the first violations of each kind in words.
	Examples []string
}

// Episode is one incident: when it began (judge ns since the case
// start), on which key, and its class.
type Episode struct {
	Key   string `json:"key"`
	Start int64  `json:"start"`
	Class Class  `json:"class"`
}

// Violations is the sum of the counts that mean a lock or resource
// failed: overlaps, stale writes accepted, lost updates and token
// regressions.
func (r Report) Violations() int64 {
	return r.Overlaps + r.StaleAccepted + r.LostUpdates + r.TokenRegressions
}

// maxExamples bounds how many violations of each kind Check describes.
const maxExamples = 2

// section is what the counter tracks of one grant.
type section struct {
	id       int64
	key      string // the key it holds; its writes and end count against it
	seq      int64  // position among the key's grants, from 1
	process  int
	granted  int64
	grant    Op // the acquire that opened it
	token    uint64
	hasToken bool
	told     bool // its lease told the holder it had ended
	// overtaken: a grant of the key that reached the judge earlier
	// certainly returned after this one (this one was reported late).
	overtaken bool
}

// keyState is the counter's view of one key.
type keyState struct {
	grants    int64
	lastToken uint64
	haveLast  bool
	lastPos   span // when the grant that carried lastToken took effect (position)
	// positions are when each grant of the key took effect (position), by
	// its place in the judge's order (seq − 1); latestLo is the latest
	// lower bound among them.
	positions []span
	latestLo  int64
	counter   int64
	accepted  int64
	active    []*section
	// incident is open while two or more sections are active: the
	// index of its Episode in the report; -1 when none is open.
	incident int
}

// Check counts the violations of a history, in the judge's order (by
// Index), as the store of guard saw them: only its writes count (and the
// writes of no guard, in a history of one store). fenced says that guard
// checked fencing tokens, so that writes without one count as Unfenced.
// Ops of unknown sections and ops out of a section's order are ignored,
// as a truncated history would have them.
func Check(ops []Op, guard string, fenced bool) Report {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Index, b.Index) })
	c := counter{fenced: fenced, keys: map[string]*keyState{}, sections: map[int64]*section{},
		extends: map[int64][]Op{}, ends: map[int64]int64{}}
	c.r.RoundTrip = roundTrip(ops)
	// Extensions are reported after they returned, often after later
	// grants of their key: take them, and the ends of the sections they
	// are weighed against, before the grants; and the releases, which an
	// extension that returned after its holder's began raced.
	releases := map[int64]int64{}
	for _, o := range ops {
		switch {
		case o.F == Release && o.Section > 0:
			if _, ok := releases[o.Section]; !ok {
				releases[o.Section] = o.Invoke
			}
		case o.F == End && o.Section > 0:
			if _, ok := c.ends[o.Section]; !ok {
				c.ends[o.Section] = o.Complete
			}
		}
	}
	for _, o := range ops {
		if o.F == Extend && o.Section > 0 {
			r, released := releases[o.Section]
			c.extended(o, released && o.Complete >= r)
		}
	}
	for _, o := range ops {
		if o.Guard == "" || o.Guard == guard {
			c.apply(o)
		}
	}
	c.r.Pauses = Landings(ops)
	return c.report(contendedGrants(ops))
}

type counter struct {
	fenced   bool
	keys     map[string]*keyState
	sections map[int64]*section
	// extends are the ok extensions of each section; ends when each
	// section ended (judge ns).
	extends  map[int64][]Op
	ends     map[int64]int64
	r        Report
	examples [5]int
}

// extended counts an extension, its departure from its contract, and
// keeps it, if ok, for the overlaps of its section. One that failed
// after its holder began to release (raced) counts as an extension but
// not as failed: the release, not the lock, took the key from under it.
func (c *counter) extended(o Op, raced bool) {
	c.r.Extends++
	if o.Type != OK {
		if !raced {
			c.r.ExtendsFailed++
		}
		return
	}
	c.extends[o.Section] = append(c.extends[o.Section], o)
	c.departed(o)
}

// departed counts a grant's or an extension's departure from its
// contract.
func (c *counter) departed(o Op) {
	switch d := departure(o); {
	case d < 0:
		c.r.ValidityShort++
		c.r.ValidityShortMax = max(c.r.ValidityShortMax, -d)
	case d > 0:
		c.r.ValidityLong++
		c.r.ValidityLongMax = max(c.r.ValidityLongMax, d)
	}
}

const (
	exOverlap = iota
	exStale
	exRegression
	exRejected
	exLost
)

func (c *counter) key(name string) *keyState {
	k := c.keys[name]
	if k == nil {
		k = &keyState{incident: -1}
		c.keys[name] = k
	}
	return k
}

func (c *counter) apply(o Op) {
	switch o.F {
	case Acquire:
		if o.Type == OK && o.Section > 0 {
			c.grant(o)
		}
	case Write:
		if s := c.sections[o.Section]; s != nil {
			c.write(o, s)
		}
	case End:
		if s := c.sections[o.Section]; s != nil {
			c.end(s)
		}
	case LeaseEnd:
		if s := c.sections[o.Section]; s != nil && !s.told {
			s.told = true
			c.r.LeaseEnds++
		}
	}
}

func (c *counter) grant(o Op) {
	k := c.key(o.Key)
	k.grants++
	s := &section{id: o.Section, key: o.Key, seq: k.grants, process: o.Process, granted: o.Complete,
		grant: o, token: o.Token, hasToken: o.HasToken}
	c.sections[o.Section] = s
	c.r.Sections++
	c.departed(o)
	pos := position(o)
	s.overtaken = len(k.positions) > 0 && k.latestLo > pos.hi
	k.positions = append(k.positions, pos)
	k.latestLo = max(k.latestLo, pos.lo)
	if len(k.active) > 0 {
		c.overlap(o, k, s)
	}
	if s.hasToken {
		// Tokens grow in the order the lock granted them: a grant
		// reported late, which certainly returned before the key's last
		// token-carrying grant, must carry a smaller token, and leaves
		// the last one as it is.
		early := k.haveLast && pos.hi < k.lastPos.lo
		if k.haveLast && (s.token <= k.lastToken) != early {
			c.r.TokenRegressions++
			if c.want(exRegression) {
				c.example("token regression: key %q section %d got token %d after token %d", o.Key, s.id, s.token, k.lastToken)
			}
		}
		if !early {
			k.lastToken, k.haveLast, k.lastPos = s.token, true, pos
		}
	}
	k.active = append(k.active, s)
}

// overlap counts and classifies the grant of s while k had active
// sections. Each pair is ordered by the lock's own bounds — when each
// Acquire returned, or its lease had ended before (order) — not by the
// judge's order of arrival: a
// holder stopped between its Acquire's return and its report arrives
// after grants that came later, and is the earlier grant of the pair. The
// later grant is judged against the earlier's contract (its grant's line,
// and the line of each extension the lock granted it before the later
// section ended); when the returns' bounds do not order the pair, both
// orders are judged, and a class they disagree on is ambiguous. The worst
// pair wins.
func (c *counter) overlap(o Op, k *keyState, s *section) {
	c.r.Overlaps++
	var class Class
	var against *section
	var line span
	for _, a := range k.active {
		x, l := c.pair(a, s)
		if worse(class, x) != class || against == nil {
			class, against, line = worse(class, x), a, l
		}
	}
	wide := ""
	if class == Ambiguous {
		w := ambiguousWidth(line, returned(o))
		c.r.AmbiguousWidthMax = max(c.r.AmbiguousWidthMax, w)
		// Without call durations there are no round trips to weigh by.
		if bound := 2*c.r.RoundTrip + validityTolerance; c.r.RoundTrip > 0 && w > bound {
			c.r.OverlapsAmbiguousWide++
			class = LockBug
			wide = fmt.Sprintf(" (undecided within %v, wider than two round trips to the judge, %v: counted against the lock)",
				time.Duration(w).Round(time.Microsecond), time.Duration(bound).Round(time.Microsecond))
		}
	}
	switch class {
	case LockBug:
		c.r.OverlapsLockBug++
	case Ambiguous:
		c.r.OverlapsAmbiguous++
	default:
		c.r.OverlapsExpiredHolder++
	}
	if k.incident < 0 {
		k.incident = len(c.r.Episodes)
		c.r.Episodes = append(c.r.Episodes, Episode{Key: o.Key, Start: s.granted, Class: class})
	}
	e := &c.r.Episodes[k.incident]
	e.Class = worse(e.Class, class)
	if c.want(exOverlap) {
		c.example("overlap (%s): key %q section %d (process %d%s) granted at %s while section %d (process %d%s, granted at %s) was active; "+
			"the earlier grant's contract kept the key until %s%s",
			class, o.Key, s.id, s.process, tokenText(s.token, s.hasToken), spanText(returned(o)),
			against.id, against.process, tokenText(against.token, against.hasToken), seconds(against.granted), spanText(line), wide)
	}
}

// pair classifies two sections of a key active at once, in the lock's
// order of their grants (order), and returns the contract line that
// decided.
func (c *counter) pair(a, b *section) (Class, span) {
	ra, rb := order(a.grant), order(b.grant)
	switch {
	case ra.hi < rb.lo:
		return c.against(a, b)
	case rb.hi < ra.lo:
		return c.against(b, a)
	}
	x, l := c.against(a, b)
	if y, _ := c.against(b, a); y != x {
		return Ambiguous, l
	}
	return x, l
}

// against judges the grant of later against the contract of earlier: its
// grant's, and each extension's the lock granted earlier before later
// ended; the worst class wins.
func (c *counter) against(earlier, later *section) (Class, span) {
	var class Class
	var line span
	end, ended := c.ends[later.id]
	for i, promise := range append([]Op{earlier.grant}, c.extends[earlier.id]...) {
		if promise.F == Extend && ended && called(promise).lo >= end {
			continue // extended after later had ended: later was no longer in its way
		}
		if x := classify(promise, later.grant); worse(class, x) != class || i == 0 {
			class, line = worse(class, x), contractLine(promise)
		}
	}
	return class, line
}

// spanText formats a moment known within bounds.
func spanText(s span) string {
	switch {
	case s.lo == NoExpiry:
		return "its release"
	case s.lo == s.hi:
		return seconds(s.lo)
	}
	return seconds(s.lo) + "–" + seconds(s.hi)
}

func (c *counter) end(s *section) {
	k := c.key(s.key)
	i := slices.Index(k.active, s)
	if i < 0 {
		return
	}
	k.active = slices.Delete(k.active, i, i+1)
	if len(k.active) == 0 || (len(k.active) == 1 && !c.superseded(k, k.active[0])) {
		// The episode ends when no holder is left but the key's newest
		// (in the lock's order, as superseded has it): every older one,
		// whom a later grant overtook, is gone.
		k.incident = -1
	}
}

func (c *counter) report(contended int64) Report {
	r := c.r
	r.ContendedGrants = contended
	r.Grants = make(map[string]int64, len(c.keys))
	for _, name := range slices.Sorted(maps.Keys(c.keys)) {
		k := c.keys[name]
		r.Grants[name] = k.grants
		if lost := k.accepted - k.counter; lost > 0 {
			r.LostUpdates += lost
			if c.want(exLost) {
				c.example("lost updates: key %q took %d accepted writes but its counter ends at %d", name, k.accepted, k.counter)
			}
		}
	}
	slices.SortStableFunc(r.Episodes, func(a, b Episode) int { return cmp.Compare(a.Start, b.Start) })
	for _, e := range r.Episodes {
		r.Incidents++
		switch e.Class {
		case LockBug:
			r.IncidentsLockBug++
		case Ambiguous:
			r.IncidentsAmbiguous++
		default:
			r.IncidentsExpiredHolder++
		}
	}
	r.Examples = c.r.Examples
	return r
}

// want reports whether another violation of kind k should be described.
func (c *counter) want(k int) bool {
	if c.examples[k] >= maxExamples {
		return false
	}
	c.examples[k]++
	return true
}

func (c *counter) example(format string, args ...any) {
	c.r.Examples = append(c.r.Examples, fmt.Sprintf(format, args...))
}

func tokenText(tok uint64, ok bool) string {
	if !ok {
		return ""
	}
	return fmt.Sprintf(", token %d", tok)
}
