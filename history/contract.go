package history

import (
	"fmt"
	"slices"
	"time"
)

// Class is how an overlap, or an incident, is judged against the lock's
// contract: the earlier grant's contract line is the moment its Acquire
// was called plus the Promise its backend declares (locker.Info.Promise
// of the TTL asked), and the later grant is the moment its Acquire
// returned — when its holder could act on it. Both moments are known on
// the judge's clock only within bounds (the round trips to the judge);
// the class says which side of the line the later grant certainly fell
// on, or that the bounds do not tell.
type Class string

// The classes, from the worst.
const (
	// LockBug: the later grant returned, at the latest, before the
	// earliest the earlier grant's contract line could be: the lock
	// granted a key it had promised to someone else.
	LockBug Class = "lock bug"
	// Ambiguous: the later grant and the contract line lie within each
	// other's clock uncertainty; no count can honestly call it a lock bug
	// or an expired holder, so it is neither.
	Ambiguous Class = "ambiguous"
	// ExpiredHolder: the later grant returned, at the earliest, after the
	// latest the line could be: the earlier holder outlived its lease —
	// what fencing is for.
	ExpiredHolder Class = "expired holder"
)

// worse returns the worse of two classes; "" is no class.
func worse(a, b Class) Class {
	rank := map[Class]int{"": 0, ExpiredHolder: 1, Ambiguous: 2, LockBug: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// span is a moment known on the judge's clock only within [lo, hi].
type span struct{ lo, hi int64 }

// took is how long an op's call took on its client's clock; 0 when the
// client did not say.
func took(o Op) int64 {
	if o.WorkerInvoke == 0 || o.WorkerComplete < o.WorkerInvoke {
		return 0
	}
	return o.WorkerComplete - o.WorkerInvoke
}

// called is when an acquire was called: no earlier than Invoke, no later
// than the latest it returned (returned) less the call's own duration.
func called(o Op) span { return span{o.Invoke, max(latest(o)-took(o), o.Invoke)} }

// latest is the latest an op returned: the judge's receipt, or, when the
// judge mapped the client's moment of return (Returned), that.
func latest(o Op) int64 {
	if o.Returned > 0 && o.Returned < o.Complete {
		return max(o.Returned, o.Invoke)
	}
	return o.Complete
}

// returned is when an acquire returned to its client: no earlier than
// Invoke plus the call's own duration, no later than the judge's receipt
// or, when the judge mapped the client's moment of return (Returned),
// than that.
func returned(o Op) span {
	hi := latest(o)
	return span{min(o.Invoke+took(o), hi), hi}
}

// order is when a grant took its place in the lock's order of grants:
// when its Acquire returned (returned), or, when its own lease had
// certainly ended before that — a holder stopped inside Acquire after
// the lock granted it, its lease running out in the stop — no later
// than the end of that lease, since the lock granted the key before the
// lease it counts from the grant ran out. Such a grant is the earlier of
// any pair whose other grant returned after its lease ended, however
// late its Acquire returned: its holder then acts as an expired holder.
func order(o Op) span {
	r, l := returned(o), contractLine(o)
	if l.hi < r.lo {
		return span{called(o).lo, l.hi}
	}
	return r
}

// position is when a grant took effect in the lock's order of grants,
// as its fencing token and the staleness of writes need it: order's span,
// except that a grant whose lease may have ended before its Acquire
// returned (its contract line reaches into the return) took effect no
// earlier than its call and no later than that line or its return. Its
// return then says nothing of its place among the grants the lock made
// once its lease had ended, which can return before it does.
func position(o Op) span {
	r, l := returned(o), contractLine(o)
	if l.lo < r.hi {
		c := called(o).lo
		return span{c, max(min(r.hi, l.hi), c)}
	}
	return r
}

// contractLine is the earliest moment, by the contract, at which a
// grant's key may go to someone else: the start of its promise plus the
// Promise. The promise starts at the call, or later where the lease itself
// says so (promiseStart). A grant without a declared promise promised
// nothing beyond its call; one with NoExpiry promised the key until its
// release.
func contractLine(o Op) span {
	c := called(o)
	if o.Promise >= NoExpiry-max(c.hi, 0) {
		return span{NoExpiry, NoExpiry}
	}
	d := promiseStart(o)
	return span{c.lo + d + o.Promise, c.hi + d + o.Promise}
}

// promiseStart is how long after the call a grant's promise started, on
// its client's clock: when the lease reported a ValidUntil later than the
// call plus the Promise, its lock counted the grant's life from a later
// moment — Redlock from the start of its winning attempt, which retries
// inside Acquire can put long after the call — and promised the key
// until then; capped at the return, the latest any promise of the grant
// can start (a ValidUntil beyond the return plus the Promise claims more
// than that, which departure reports). 0 when the lease reported less,
// or nothing: the line never moves earlier than the call's, whatever the
// lease said.
func promiseStart(o Op) int64 {
	if o.WorkerValidUntil == 0 || o.WorkerInvoke == 0 || o.Promise <= 0 || o.Promise == NoExpiry {
		return 0
	}
	return min(max(o.WorkerValidUntil-o.Promise-o.WorkerInvoke, 0), took(o))
}

// classify judges the grant later against the contract of earlier (a
// grant or an extension of the section earlier holds), a section still
// active when later was granted.
func classify(earlier, later Op) Class {
	line, at := contractLine(earlier), returned(later)
	switch {
	case at.hi < line.lo:
		return LockBug
	case at.lo >= line.hi:
		return ExpiredHolder
	}
	return Ambiguous
}

// ambiguousWidth is how wide the uncertainty of an undecided overlap is:
// the span its contract line may lie in and the span the later grant may
// have returned in, together; each is a round trip to the judge less the
// call it brackets.
func ambiguousWidth(line, at span) int64 { return (line.hi - line.lo) + (at.hi - at.lo) }

// roundTrip is the median, over the granted acquires of ops, of what the
// judge's bounds add to the call: Complete − Invoke − the call's own
// duration (0 without any).
func roundTrip(ops []Op) int64 {
	var rt []int64
	for _, o := range ops {
		if o.F == Acquire && o.Type == OK && took(o) > 0 {
			rt = append(rt, max(o.Complete-o.Invoke-took(o), 0))
		}
	}
	if len(rt) == 0 {
		return 0
	}
	slices.Sort(rt)
	return rt[len(rt)/2]
}

// validityTolerance absorbs the clock reads a backend makes inside the
// call it computes ValidUntil from (they lie between the client's own
// reads only up to the timer's granularity).
const validityTolerance = int64(time.Millisecond)

// departure is how far a grant's own ValidUntil lies outside what its
// contract allows, on its client's clock (no mapping between clocks
// needed): negative when the lease reported less than the contract
// promises from the call (ValidUntil before the call plus the Promise),
// positive when it reported more than its lock can give from any moment
// of the call (after the return plus the MaxValidity); 0 inside, or when
// the op lacks the lease's ValidUntil, the call's times or a declared
// contract.
func departure(o Op) int64 {
	if o.WorkerValidUntil == 0 || o.WorkerInvoke == 0 || o.WorkerComplete < o.WorkerInvoke ||
		o.Promise <= 0 || o.Promise == NoExpiry || o.MaxValidity < o.Promise {
		return 0
	}
	switch lo, hi := o.WorkerInvoke+o.Promise, o.WorkerComplete+o.MaxValidity; {
	case o.WorkerValidUntil < lo-validityTolerance:
		return o.WorkerValidUntil - lo
	case o.WorkerValidUntil > hi+validityTolerance:
		return o.WorkerValidUntil - hi
	}
	return 0
}

// Contract is a backend's declared promise for the grants of one case
// (ns), as its descriptor declares it for the case's TTL and params, not
// as its workers report it: a checker draws the line with it, so that a
// worker (or a history) that reports a longer or shorter promise cannot
// move the line.
type Contract struct {
	// Promise is locker.Info.Promise of the case's TTL.
	Promise int64 `json:"promise"`
	// MaxValidity is locker.Info.MaxValidity of the case's TTL.
	MaxValidity int64 `json:"max_validity"`
}

// Departures are the grants and extensions of a history whose reported
// promise differs from the declared one.
type Departures struct {
	// N counts them.
	N int64
	// Examples describe the first few in words.
	Examples []string
}

// Impose returns ops with c in place of every promise they report (each
// grant and extension that carries one), and the ops whose report
// differed from c: a finding about the records, or about the backend's
// own account of its contract.
func (c Contract) Impose(ops []Op) ([]Op, Departures) {
	out := make([]Op, len(ops))
	var d Departures
	for i, o := range ops {
		if o.Promise != 0 || o.MaxValidity != 0 {
			if o.Promise != c.Promise || o.MaxValidity != c.MaxValidity {
				d.N++
				if len(d.Examples) < maxExamples {
					d.Examples = append(d.Examples, fmt.Sprintf("process %d %s of key %q (op %d) reported promise %v, "+
						"max validity %v; declared %v, %v", o.Process, o.F, o.Key, o.Index, time.Duration(o.Promise),
						time.Duration(o.MaxValidity), time.Duration(c.Promise), time.Duration(c.MaxValidity)))
				}
			}
			o.Promise, o.MaxValidity = c.Promise, c.MaxValidity
		}
		out[i] = o
	}
	return out, d
}
