// Package history is what a case leaves for anyone to check again: every
// operation its clients made, as the judge saw it, and the checkers that
// judge it — the overlap counter (two holders of a key at once, each
// overlap judged against the lock's contract as a lock bug, an expired
// holder or ambiguous, chained into incidents, with the stale writes and
// lost updates they caused) and
// porcupine's linearizability check against a mutex model and a
// fenced-mutex model of each key.
//
// Times are on the judge's clock, in nanoseconds since the case started,
// and always err on the side that cannot invent a violation: an
// operation's Invoke is at or before the moment the client really called
// it, its Complete at or after the moment the call really returned. A
// section (a grant, read, write and end of one key by one holder) runs
// from the judge's receipt of the grant, which the client sends after
// Acquire returned, to the judge's receipt of the end, which the client
// has acknowledged before it calls Release: the judge's section lies
// inside the real holding, so message delays can hide an overlap of at
// most one round trip and can never invent one.
package history

import (
	"fmt"
	"math"
	"time"

	"github.com/lockbench/lockbench/results"
)

// Func is what an operation did.
type Func string

// The operations of a client's cycle, in order.
const (
	// Acquire is a call of Locker.Acquire. An ok acquire is a grant: it
	// opens a section, numbered by Op.Section.
	Acquire Func = "acquire"
	// Read is the section's first access to the resource: the holder
	// reads the key's counter (Value) and, under the cas guard, marks the
	// key as its own.
	Read Func = "read"
	// Write writes the counter it read plus one (Value); ok when the
	// resource accepted it, fail when its guard rejected it.
	Write Func = "write"
	// End closes the section: the holder is done with the resource. An
	// info end means the holder's process died (or its connection to the
	// judge broke) inside the section.
	End Func = "end"
	// Release is a call of Lease.Release: ok when the backend still held
	// the key, fail when the lease had already ended (ErrNotHeld, ErrLost),
	// info when the answer is unknown.
	Release Func = "release"
	// LeaseEnd is what the holder's lease told it inside its section: it
	// ended other than by Release — Done closed with ErrExpired or
	// ErrLost, or its ValidUntil passed — before the holder was done. The
	// client checks its lease, as a careful client would, before it
	// writes and before it ends the section, and reports what it found
	// once (Error); the op's time is when the holder learned it. It tells
	// a lock that revoked a lease and told its holder in time from one
	// whose holder went on, its lease saying nothing.
	LeaseEnd Func = "lease-end"
	// Extend is an extension of a section's lease, by its holder or by
	// the lease's auto-extend watchdog (locker.Trace), which the holder
	// reports once it returned: ok when the lock kept the key for the TTL
	// asked (ValidUntil is the lease's new deadline, Promise the contract
	// of that TTL from the call, which moves the section's contract line
	// on), fail when the lock answered that the key was no longer the
	// lease's, info when the outcome is unknown. Its times are the call's,
	// on the holder's clock (WorkerInvoke, WorkerComplete), mapped to the
	// judge's; it is recorded when the holder reports it, which can be
	// after later grants of the key: the checkers take extensions by
	// their section, not by their place in the history.
	Extend Func = "extend"
	// Pause is a stop of a client's process (SIGSTOP) by the nemesis, as
	// the judge recorded it: Invoke is before the stop was asked, Complete
	// when the process was seen stopped, Length how long it stayed
	// stopped at least, Point where in the client's cycle it was aimed.
	// Where it landed follows from the client's own operations around it
	// (Landings).
	Pause Func = "pause"
	// Inject is one injection of the case's fault by the nemesis, as it
	// recorded it (Op.Injection: its targets, whether it tested what its
	// class is meant to test, what it met and did): Invoke is when it
	// struck, Complete when its window closed, Error why it tested
	// nothing. The checkers of locks pass it by; lockbench check
	// verifies a case's tested flags from it.
	Inject Func = "inject"
)

// Type is an operation's outcome, as in Jepsen.
type Type string

// The outcomes.
const (
	// OK: the operation happened.
	OK Type = "ok"
	// Fail: the operation certainly did not take effect (an acquire
	// refused, a write rejected, a release of a lease that had ended).
	Fail Type = "fail"
	// Info: unknown, the operation may or may not have taken effect (a
	// timeout, a node error, a worker that died or whose reply was lost);
	// the checkers treat it as possibly taking effect at any time after
	// its invocation.
	Info Type = "info"
)

// NoExpiry is Op.ValidUntil of a lease whose lock promised no end (a
// lease with no deadline): any overlap with its section is a lock bug.
const NoExpiry = math.MaxInt64

// Op is one operation of a case's history.
type Op struct {
	// Index is the op's position in the history, in the order the judge
	// recorded it, from 0.
	Index int `json:"index"`
	// Process is the client that made it: a worker process, or a
	// goroutine client of the runner; unique within the case across
	// hosts.
	Process int    `json:"process"`
	Host    string `json:"host,omitempty"`
	F       Func   `json:"f"`
	Type    Type   `json:"type"`
	Key     string `json:"key"`
	// Section numbers the grant the op belongs to (acquire ok, read,
	// write, end, release), from 1 within the case; 0 for an acquire that
	// was not granted.
	Section int64 `json:"section,omitempty"`
	// Guard names the store of a read or write: the resource runs one
	// store per guard side by side, each seeing every section.
	Guard string `json:"guard,omitempty"`
	// Invoke and Complete bound the operation on the judge's clock (ns
	// since the case started): the operation began no earlier than Invoke
	// and ended no later than Complete. Read, write and end happen at the
	// judge: Invoke equals Complete. For an info op, Complete is when the
	// judge learned that the outcome is unknown; the checkers take it as
	// open-ended.
	Invoke   int64 `json:"invoke"`
	Complete int64 `json:"complete"`
	// WorkerInvoke and WorkerComplete are the same moments on the
	// client's own wall clock (Unix ns), for acquire and release.
	WorkerInvoke   int64 `json:"w_invoke,omitempty"`
	WorkerComplete int64 `json:"w_complete,omitempty"`
	// Returned is, for an acquire ok, the latest its Acquire returned on
	// the judge's clock: the client's own moment of return (WorkerComplete)
	// mapped with the upper bound of its clock's offset from the judge's,
	// at or after the real moment and at or before Complete. A grant
	// reported late (its holder stopped between the return and the report)
	// is ordered by it, not by its arrival. 0 when the offset was unknown:
	// Complete bounds the return then.
	Returned int64 `json:"returned,omitempty"`
	// Token is the grant's fencing token, if HasToken (acquire ok and
	// write).
	Token    uint64 `json:"token,omitempty"`
	HasToken bool   `json:"has_token,omitempty"`
	// ValidUntil is, for an acquire ok, the end of the lease's validity
	// as its holder knew it (Lease.ValidUntil at the grant) on the judge's
	// clock, at or before the real moment: ns since the case start, or
	// NoExpiry. It is what the lease reported, kept beside the contract;
	// the checkers judge by Promise.
	ValidUntil int64 `json:"valid_until,omitempty"`
	// WorkerValidUntil is the same deadline on the client's own clock
	// (Unix ns; 0 when the lease reported none), to be compared with the
	// contract without mapping between clocks.
	WorkerValidUntil int64 `json:"w_valid_until,omitempty"`
	// Promise is, for an acquire ok, the lock's contract for the grant:
	// how long after the call of Acquire nobody else may be granted the
	// key (ns), as the backend declares it (locker.Info.Promise of the TTL
	// asked), whatever the lease reported; NoExpiry for a grant promised
	// until its release, 0 when none was declared.
	Promise int64 `json:"promise,omitempty"`
	// MaxValidity is, for an acquire ok, the longest its lock can keep the
	// key from the grant (ns; locker.Info.MaxValidity of the TTL asked): a
	// lease that reported a ValidUntil past the return plus this claimed
	// more than its lock can give. 0 when none was declared.
	MaxValidity int64 `json:"max_validity,omitempty"`
	// Value is the counter a read returned, or the value a write wrote.
	Value int64 `json:"value,omitempty"`
	// Error is the failure, for fail and info ops.
	Error string `json:"error,omitempty"`
	// Point is, for a pause, where in its client's cycle it was aimed.
	Point Point `json:"point,omitempty"`
	// Length is, for a pause, how long the process stayed stopped at
	// least (ns): it was resumed no earlier than Length after the stop.
	Length int64 `json:"length,omitempty"`
	// Injection is, for an inject op, the injection as the nemesis
	// recorded it, before the pauses' landings are read from the history.
	Injection *results.Target `json:"injection,omitempty"`
}

// String describes the op in one line, for examples and logs.
func (o Op) String() string {
	s := fmt.Sprintf("#%d process %d %s %s %q", o.Index, o.Process, o.F, o.Type, o.Key)
	if o.Section > 0 {
		s += fmt.Sprintf(" section %d", o.Section)
	}
	if o.HasToken {
		s += fmt.Sprintf(" token %d", o.Token)
	}
	s += fmt.Sprintf(" at %s", seconds(o.Complete))
	if o.Error != "" {
		s += ": " + o.Error
	}
	return s
}

// seconds formats judge ns as seconds since the case start.
func seconds(ns int64) string { return fmt.Sprintf("%.6fs", float64(ns)/1e9) }

// Injects returns the injections of a case's nemesis (targets, their
// windows) as inject ops, indexed from next on: each from its strike
// (Target.AtS) to the end of its window (the window that began with it;
// its strike when none did).
func Injects(targets []results.Target, windows []results.Window, next int) []Op {
	out := make([]Op, 0, len(targets))
	for i, t := range targets {
		at := int64(t.AtS * float64(time.Second))
		end := at
		for _, w := range windows {
			if s := int64(w.StartS * float64(time.Second)); s >= at-int64(time.Millisecond) && s <= at+int64(time.Millisecond) {
				end = max(end, int64(w.EndS*float64(time.Second)))
				break
			}
		}
		typ := OK
		if t.Tested != nil && !*t.Tested {
			typ = Fail
		}
		t := t
		out = append(out, Op{Index: next + i, F: Inject, Type: typ, Invoke: at, Complete: end, Error: t.WhyNot, Injection: &t})
	}
	return out
}
