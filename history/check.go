package history

import (
	"cmp"
	"fmt"
	"slices"
)

// Report is what the overlap counter found in a history. Every count is
// defined on the judge's order of events (see the package doc for why
// that order cannot invent a violation):
//
//   - Overlaps: sections granted while another section of the same key
//     was active (granted, not yet ended). Each section counts at most
//     once, when it is granted; three sections of a key active at once
//     count 2.
//   - OverlapsLockBug: overlaps where some active section's lease was
//     still valid at the new grant by the lock's own promise (its
//     ValidUntil, a lower bound, had not passed): the lock granted a key
//     it had promised to someone else. OverlapsExpiredHolder: the others,
//     where every active holder had outlived its lease — what fencing is
//     for.
//   - Incidents: episodes of two holders at once: an incident begins with
//     an overlap and lasts until none of the sections active in it is
//     active any more, taking in every section granted meanwhile (a paused
//     holder overtaken by a hundred grants is one incident); it is a lock
//     bug when any of its overlaps is. Overlaps grow with throughput;
//     incidents grow with failures.
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
type Report struct {
	Sections, Writes, Accepted                                  int64
	Overlaps, OverlapsLockBug, OverlapsExpiredHolder            int64
	Incidents, IncidentsLockBug, IncidentsExpiredHolder         int64
	StaleAccepted, StaleRejected, LostUpdates, TokenRegressions int64
	RejectedCurrent, Unfenced                                   int64
	// IncidentStarts are the times the incidents began (judge ns since
	// the case start), in order, for attributing them to fault
	// injections.
	IncidentStarts []int64 `json:",omitempty"`
	// Grants counts the sections of each key.
	Grants map[string]int64
	// Examples describe the first violations of each kind in words.
	Examples []string
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
	id         int64
	seq        int64 // position among the key's grants, from 1
	process    int
	granted    int64
	validUntil int64
	token      uint64
	hasToken   bool
}

// keyState is the counter's view of one key.
type keyState struct {
	grants    int64
	lastToken uint64
	haveLast  bool
	counter   int64
	accepted  int64
	active    []*section
	// incident is open while two or more sections are active; lockBug
	// says whether one of its overlaps was a lock bug.
	incident, lockBug bool
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
	c := counter{fenced: fenced, keys: map[string]*keyState{}, sections: map[int64]*section{}}
	for _, o := range ops {
		if o.Guard == "" || o.Guard == guard {
			c.apply(o)
		}
	}
	return c.report()
}

type counter struct {
	fenced   bool
	keys     map[string]*keyState
	sections map[int64]*section
	r        Report
	examples [5]int
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
		k = &keyState{}
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
			c.end(o.Key, s)
		}
	}
}

func (c *counter) grant(o Op) {
	k := c.key(o.Key)
	k.grants++
	s := &section{id: o.Section, seq: k.grants, process: o.Process, granted: o.Complete,
		validUntil: o.ValidUntil, token: o.Token, hasToken: o.HasToken}
	c.sections[o.Section] = s
	c.r.Sections++
	if len(k.active) > 0 {
		c.r.Overlaps++
		bug := false
		for _, a := range k.active {
			bug = bug || a.validUntil > s.granted
		}
		if bug {
			c.r.OverlapsLockBug++
		} else {
			c.r.OverlapsExpiredHolder++
		}
		if !k.incident {
			k.incident, k.lockBug = true, false
			c.r.IncidentStarts = append(c.r.IncidentStarts, s.granted)
		}
		k.lockBug = k.lockBug || bug
		if c.want(exOverlap) {
			a := k.active[len(k.active)-1]
			class := "its holder's lease had expired (expired holder)"
			if bug {
				class = "its holder's lease was still valid (lock bug)"
			}
			c.example("overlap: key %q section %d (process %d%s) granted at %s while section %d (process %d%s, granted at %s) was active and %s",
				o.Key, s.id, s.process, tokenText(s.token, s.hasToken), seconds(s.granted),
				a.id, a.process, tokenText(a.token, a.hasToken), seconds(a.granted), class)
		}
	}
	if s.hasToken {
		if k.haveLast && s.token <= k.lastToken {
			c.r.TokenRegressions++
			if c.want(exRegression) {
				c.example("token regression: key %q section %d got token %d after token %d", o.Key, s.id, s.token, k.lastToken)
			}
		}
		k.lastToken, k.haveLast = s.token, true
	}
	k.active = append(k.active, s)
}

func (c *counter) write(o Op, s *section) {
	k := c.key(o.Key)
	c.r.Writes++
	if c.fenced && !s.hasToken {
		c.r.Unfenced++
	}
	stale := k.grants > s.seq
	ok := o.Type == OK
	switch {
	case ok && stale:
		c.r.StaleAccepted++
		if c.want(exStale) {
			c.example("stale write accepted: key %q section %d (process %d%s) wrote %d at %s after section #%d of the key was granted",
				o.Key, s.id, s.process, tokenText(s.token, s.hasToken), o.Value, seconds(o.Complete), k.grants)
		}
	case !ok && stale:
		c.r.StaleRejected++
	case !ok:
		c.r.RejectedCurrent++
		if c.want(exRejected) {
			c.example("write of the newest holder rejected: key %q section %d%s", o.Key, s.id, tokenText(s.token, s.hasToken))
		}
	}
	if ok {
		c.r.Accepted++
		k.accepted++
		k.counter = o.Value
	}
}

func (c *counter) end(key string, s *section) {
	k := c.key(key)
	i := slices.Index(k.active, s)
	if i < 0 {
		return
	}
	k.active = slices.Delete(k.active, i, i+1)
	if k.incident && len(k.active) == 0 {
		c.closeIncident(k)
	}
}

func (c *counter) closeIncident(k *keyState) {
	c.r.Incidents++
	if k.lockBug {
		c.r.IncidentsLockBug++
	} else {
		c.r.IncidentsExpiredHolder++
	}
	k.incident, k.lockBug = false, false
}

func (c *counter) report() Report {
	r := c.r
	r.Grants = make(map[string]int64, len(c.keys))
	names := make([]string, 0, len(c.keys))
	for name := range c.keys {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		k := c.keys[name]
		r.Grants[name] = k.grants
		if k.incident { // still open when the history ends
			c.closeIncident(k)
		}
		if lost := k.accepted - k.counter; lost > 0 {
			r.LostUpdates += lost
			if c.want(exLost) {
				c.example("lost updates: key %q took %d accepted writes but its counter ends at %d", name, k.accepted, k.counter)
			}
		}
	}
	r.Incidents, r.IncidentsLockBug, r.IncidentsExpiredHolder = c.r.Incidents, c.r.IncidentsLockBug, c.r.IncidentsExpiredHolder
	r.Examples = c.r.Examples
	slices.Sort(r.IncidentStarts)
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
