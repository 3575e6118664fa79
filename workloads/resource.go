package workloads

import (
	"fmt"
	"sync"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Guard is how the resource protects itself from a holder whose lease has
// ended: the two remedies of the Redlock debate, measured side by side.
type Guard string

// The guard modes.
const (
	// GuardNone accepts every write: the resource trusts the lock.
	GuardNone Guard = "none"
	// GuardFence is Kleppmann's fencing token: the resource keeps the
	// highest token it has seen for a key (from any section that read or
	// wrote it) and rejects a write whose token is lower, like
	// UPDATE … SET token = $t WHERE token <= $t. A lease without a token
	// cannot be fenced; its writes are accepted and counted as Unfenced.
	GuardFence Guard = "fence"
	// GuardCAS is antirez's remedy: when a section begins it marks the key
	// with the grant's unique value, and it writes only WHERE mark =
	// value. It needs no counter from the lock, but it does not order
	// writers: a holder that pauses before it marks can still mark over a
	// newer holder and write.
	GuardCAS Guard = "cas"
)

// ParseGuard checks a guard mode name; the error names the bad value.
func ParseGuard(s string) (Guard, error) {
	switch g := Guard(s); g {
	case GuardNone, GuardFence, GuardCAS:
		return g, nil
	}
	return "", locker.Invalidf("guard %q: want %q, %q or %q", s, GuardNone, GuardFence, GuardCAS)
}

// maxExamples bounds how many violations of each kind a Resource
// describes in words.
const maxExamples = 2

// exampleKind indexes the violations described in words.
type exampleKind uint8

const (
	exOverlap exampleKind = iota
	exStale
	exRegression
	exRejected
	numExampleKinds
)

// Resource is the shared resource every critical section works on, and
// the safety checker that watches it. Each key has a read-modify-write
// counter, the highest fencing token seen and a CAS mark; the checker
// also sees every grant, so it knows which sections of a key are active
// and which holder has been superseded. It is safe for concurrent use, and
// every call is atomic, so the order in which its calls are made is the
// history it judges.
//
// A section goes through Grant (the lock was granted: the section's
// interval begins), Read (the holder shows its token, marks the key and
// reads the counter), Write (after the hold: counter+1, if the guard lets
// it) and End (the section's interval ends, before the release). Begin is
// Grant and Read in one step. The counts, defined exactly:
//
//   - Overlaps: sections that were granted while another section of the
//     same key was active (granted and not yet ended). Each section counts
//     at most once, when it is granted; three sections of a key active at
//     once count 2.
//   - StaleAccepted / StaleRejected: writes made by a superseded holder,
//     that is after a later section of the same key was granted, which
//     the guard accepted / rejected.
//   - LostUpdates: accepted writes minus the sum of the final counters:
//     the increments that a concurrent writer overwrote.
//   - TokenRegressions: grants whose token is not above the token of the
//     previous grant of the key that carried one, in grant order.
//
// A correct lock shows none of them; a lock that lets two holders in
// shows overlaps, and the guard decides whether the superseded holder's
// write lands (stale accepted, usually with a lost update) or not.
//
// There is no separate linearizability check (porcupine): the resource's
// calls are atomic, so the accepted read-modify-write sections of a key
// are linearizable as increments exactly when none was lost — with no
// lost update every accepted write found the counter at the value it had
// read, and the writes in order are a valid linearization; with one, two
// writes read the same value. A checker would give the LostUpdates == 0
// verdict at exponential worst-case cost.
type Resource struct {
	guard Guard

	mu       sync.Mutex
	epoch    time.Time
	keys     map[string]*keyState
	values   uint64 // the last CAS value handed out
	counts   Report
	examples []string
	examined [numExampleKinds]int // examples given, per kind
}

// keyState is what the resource and the checker know about one key.
type keyState struct {
	grants    int64  // sections granted, which numbers them in grant order
	lastToken uint64 // token of the last grant that carried one
	haveLast  bool
	maxToken  uint64 // highest token the resource has seen (fence)
	haveMax   bool
	mark      uint64 // CAS mark: value of the section that marked last; 0 is none
	counter   int64
	accepted  int64
	active    []activeSection
}

// activeSection describes a granted section that has not ended, for the
// overlap examples.
type activeSection struct {
	seq      int64
	token    uint64
	hasToken bool
	at       time.Time
}

// NewResource returns an empty resource guarded by g (GuardNone when
// empty); the error names an unknown guard.
func NewResource(g Guard) (*Resource, error) {
	if g == "" {
		g = GuardNone
	}
	if _, err := ParseGuard(string(g)); err != nil {
		return nil, err
	}
	return &Resource{guard: g, epoch: time.Now(), keys: make(map[string]*keyState)}, nil
}

// Guard is the resource's guard mode.
func (r *Resource) Guard() Guard { return r.guard }

// setEpoch makes example timestamps relative to t (the start of a run).
func (r *Resource) setEpoch(t time.Time) {
	r.mu.Lock()
	r.epoch = t
	r.mu.Unlock()
}

// Grant is what the resource is told about a grant: its key and, if the
// backend issued one, its fencing token.
type Grant struct {
	Key      string
	Token    uint64
	HasToken bool
}

// GrantOf returns the Grant of a lease.
func GrantOf(l locker.Lease) Grant {
	tok, ok := l.Token()
	return Grant{Key: l.Key(), Token: tok, HasToken: ok}
}

// Section is one critical section's handle on the resource. It is a
// value owned by the client running the section (not safe for concurrent
// use); its methods take the resource's lock.
type Section struct {
	r        *Resource
	k        *keyState
	g        Grant
	seq      int64
	value    uint64 // the grant's unique value, for the CAS mark
	read     int64
	state    sectionState
	accepted bool
}

type sectionState uint8

const (
	sectionGranted sectionState = iota
	sectionRead
	sectionWritten
	sectionEnded
)

// Grant records that g was granted: the section's interval begins now.
// Call it as soon as Acquire returns, before anything else the holder
// does, so that the checker sees the grant even if the holder then stalls.
func (r *Resource) Grant(g Grant) Section {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grant(g)
}

// Begin is Grant followed by Read, in one atomic step: no other call can
// fall between them, so a write from a superseded holder cannot slip in
// between a newer grant and the newer holder's read.
func (r *Resource) Begin(g Grant) Section {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.grant(g)
	s.readLocked()
	return s
}

func (r *Resource) grant(g Grant) Section {
	k := r.keys[g.Key]
	if k == nil {
		k = &keyState{}
		r.keys[g.Key] = k
	}
	now := time.Now()
	k.grants++
	r.values++
	s := Section{r: r, k: k, g: g, seq: k.grants, value: r.values}
	r.counts.Sections++
	if len(k.active) > 0 {
		r.counts.Overlaps++
		if r.wantExample(exOverlap) {
			a := k.active[len(k.active)-1]
			r.example("overlap: key %q section #%d%s granted at %v while #%d%s, granted at %v, was active",
				g.Key, s.seq, tokenText(g.Token, g.HasToken), r.since(now), a.seq, tokenText(a.token, a.hasToken), r.since(a.at))
		}
	}
	if g.HasToken {
		if k.haveLast && g.Token <= k.lastToken {
			r.counts.TokenRegressions++
			if r.wantExample(exRegression) {
				r.example("token regression: key %q section #%d got token %d after token %d", g.Key, s.seq, g.Token, k.lastToken)
			}
		}
		k.lastToken, k.haveLast = g.Token, true
	}
	k.active = append(k.active, activeSection{seq: s.seq, token: g.Token, hasToken: g.HasToken, at: now})
	return s
}

// Read is the section's first touch of the resource: it shows the token
// (the resource remembers the highest), marks the key with the grant's
// value (the CAS mark) and returns the counter, which Write will
// increment. Calling it again returns the same value.
func (s *Section) Read() int64 {
	if s.r == nil {
		return 0
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.readLocked()
	return s.read
}

func (s *Section) readLocked() {
	if s.state != sectionGranted {
		return
	}
	k := s.k
	if s.g.HasToken && (!k.haveMax || s.g.Token > k.maxToken) {
		k.maxToken, k.haveMax = s.g.Token, true
	}
	k.mark = s.value
	s.read = k.counter
	s.state = sectionRead
}

// Write writes the counter the section read plus one, if the guard
// accepts, and reports whether it did. Make it at the end of the hold:
// that is what makes a paused holder's write stale. A section that has
// not read reads first; a second Write returns the first one's answer.
func (s *Section) Write() bool {
	if s.r == nil {
		return false
	}
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	s.readLocked()
	if s.state != sectionRead {
		return s.accepted
	}
	s.state = sectionWritten
	k := s.k
	ok := true
	switch r.guard {
	case GuardFence:
		if !s.g.HasToken {
			r.counts.Unfenced++
		} else {
			ok = s.g.Token >= k.maxToken
		}
	case GuardCAS:
		ok = k.mark == s.value
	}
	r.counts.Writes++
	stale := k.grants > s.seq
	switch {
	case ok && stale:
		r.counts.StaleAccepted++
		if r.wantExample(exStale) {
			r.example("stale write accepted: key %q section #%d%s wrote %d at %v after #%d was granted",
				s.g.Key, s.seq, tokenText(s.g.Token, s.g.HasToken), s.read+1, r.since(time.Now()), k.grants)
		}
	case !ok && stale:
		r.counts.StaleRejected++
	case !ok:
		r.counts.RejectedCurrent++
		if r.wantExample(exRejected) {
			r.example("write of the newest holder rejected: key %q section #%d%s (resource token %d)",
				s.g.Key, s.seq, tokenText(s.g.Token, s.g.HasToken), k.maxToken)
		}
	}
	if ok {
		r.counts.Accepted++
		k.accepted++
		k.counter = s.read + 1
	}
	s.accepted = ok
	return ok
}

// End ends the section's interval: call it when the holder has finished
// with the resource, before it releases the lease. Later calls do nothing.
func (s *Section) End() {
	if s.r == nil {
		return
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if s.state == sectionEnded {
		return
	}
	s.state = sectionEnded
	a := s.k.active
	for i := range a {
		if a[i].seq == s.seq {
			a[i] = a[len(a)-1]
			s.k.active = a[:len(a)-1]
			break
		}
	}
}

// Seq is the section's number among the grants of its key (1 is the
// first).
func (s *Section) Seq() int64 { return s.seq }

// Report is what a Resource counted. The safety counts are defined on
// Resource.
type Report struct {
	// Sections is the number of grants the resource was told of.
	Sections int64
	// Writes, Accepted: writes made, and accepted by the guard.
	Writes, Accepted int64
	// The safety counts, defined on Resource.
	Overlaps, StaleAccepted, StaleRejected, LostUpdates, TokenRegressions int64
	// RejectedCurrent counts rejected writes of holders that had not been
	// superseded: the guard refused the newest holder, which happens when
	// its token is below one seen before (a token regression). Safe, but
	// it is work lost.
	RejectedCurrent int64
	// Unfenced counts writes that GuardFence could not check because
	// their lease carried no token.
	Unfenced int64
	// Grants is the number of sections per key.
	Grants map[string]int64
	// Examples describe the first violations of each kind in words, for
	// the notes.
	Examples []string
}

// Report returns the counts so far. Call it once every section has ended
// for final numbers.
func (r *Resource) Report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := r.counts
	rep.Grants = make(map[string]int64, len(r.keys))
	rep.LostUpdates = 0
	for name, k := range r.keys {
		rep.Grants[name] = k.grants
		rep.LostUpdates += k.accepted - k.counter
	}
	rep.Examples = append([]string(nil), r.examples...)
	return rep
}

// wantExample reports whether another violation of kind k should be
// described, and counts it, so that the hot path formats nothing once
// enough have been. The caller holds r.mu.
func (r *Resource) wantExample(k exampleKind) bool {
	if r.examined[k] >= maxExamples {
		return false
	}
	r.examined[k]++
	return true
}

// example records a violation in words. The caller holds r.mu.
func (r *Resource) example(format string, args ...any) {
	r.examples = append(r.examples, fmt.Sprintf(format, args...))
}

// since formats t relative to the epoch. The caller holds r.mu.
func (r *Resource) since(t time.Time) string {
	return fmt.Sprintf("%.6fs", t.Sub(r.epoch).Seconds())
}

func tokenText(tok uint64, ok bool) string {
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (token %d)", tok)
}
