package history

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/lockbench/lockbench/results"
)

// builder writes constructed histories in the judge's order. Times are
// in milliseconds since the case start.
type builder struct {
	ops  []Op
	next int64 // next section id
}

const ms = int64(time.Millisecond)

func (b *builder) add(o Op) {
	o.Index = len(b.ops)
	b.ops = append(b.ops, o)
}

// base is the clients' wall clock at the case start (Unix ns): the
// constructed clients' clocks agree with the judge's.
const base = int64(1_700_000_000) * int64(time.Second)

// grant records an acquire by process p of key granted between inv and
// cmp (ms) with token tok (0: none), whose backend promised the key until
// valid (ms; -1: until its release) and whose lease reported as much, and
// returns the section. The call took as long on the client as on the
// judge's bounds; within sets a shorter call (see took).
func (b *builder) grant(p int, key string, inv, cmp int64, tok uint64, valid int64) int64 {
	b.next++
	v, promise := valid*ms, (valid-inv)*ms
	if valid < 0 {
		v, promise = NoExpiry, NoExpiry
	}
	o := Op{Process: p, F: Acquire, Type: OK, Key: key, Section: b.next, Invoke: inv * ms, Complete: cmp * ms,
		WorkerInvoke: base + inv*ms, WorkerComplete: base + cmp*ms,
		Token: tok, HasToken: tok > 0, ValidUntil: v, Promise: promise, MaxValidity: promise}
	if valid >= 0 {
		o.WorkerValidUntil = base + v
	}
	b.add(o)
	return b.next
}

// took makes the last op's call last d ms on its client's clock, inside
// its bounds on the judge's (the rest is the round trips to the judge),
// starting at the earliest.
func (b *builder) took(d int64) {
	o := &b.ops[len(b.ops)-1]
	o.WorkerComplete = o.WorkerInvoke + d*ms
}

// reported sets what the last grant's lease reported as its ValidUntil
// (ms), whatever its contract.
func (b *builder) reported(valid int64) {
	o := &b.ops[len(b.ops)-1]
	o.ValidUntil, o.WorkerValidUntil = valid*ms, base+valid*ms
}

func (b *builder) acquireFailed(p int, key string, inv, cmp int64, t Type) {
	b.add(Op{Process: p, F: Acquire, Type: t, Key: key, Invoke: inv * ms, Complete: cmp * ms,
		WorkerInvoke: base + inv*ms, WorkerComplete: base + cmp*ms})
}

func (b *builder) section(op Func, t Type, p int, key string, s, at, value int64) {
	tok := b.tokenOf(s)
	b.add(Op{Process: p, F: op, Type: t, Key: key, Section: s, Invoke: at * ms, Complete: at * ms, Value: value, Token: tok, HasToken: tok > 0})
}

func (b *builder) tokenOf(s int64) uint64 {
	for _, o := range b.ops {
		if o.F == Acquire && o.Section == s {
			return o.Token
		}
	}
	return 0
}

func (b *builder) read(p int, key string, s, at, v int64)   { b.section(Read, OK, p, key, s, at, v) }
func (b *builder) write(p int, key string, s, at, v int64)  { b.section(Write, OK, p, key, s, at, v) }
func (b *builder) reject(p int, key string, s, at, v int64) { b.section(Write, Fail, p, key, s, at, v) }
func (b *builder) end(p int, key string, s, at int64)       { b.section(End, OK, p, key, s, at, 0) }
func (b *builder) died(p int, key string, s, at int64)      { b.section(End, Info, p, key, s, at, 0) }

func (b *builder) release(p int, key string, s, inv, cmp int64, t Type) {
	b.add(Op{Process: p, F: Release, Type: t, Key: key, Section: s, Invoke: inv * ms, Complete: cmp * ms})
}

// cycle is a whole clean section: grant, read v, write v+1, end, release.
func (b *builder) cycle(p int, key string, from int64, tok uint64, v int64) {
	s := b.grant(p, key, from, from+1, tok, from+1000)
	b.read(p, key, s, from+2, v)
	b.write(p, key, s, from+3, v+1)
	b.end(p, key, s, from+4)
	b.release(p, key, s, from+5, from+6, OK)
}

// counts are the numbers a constructed history must produce.
type counts struct {
	Overlaps, LockBug, Expired, Ambiguous, Incidents, IncidentsLockBug, IncidentsAmbiguous int64
	StaleAccepted, StaleRejected, Lost, Regressions                                        int64
	Contended, ValidityShort, ValidityLong                                                 int64
}

func countsOf(r Report) counts {
	return counts{r.Overlaps, r.OverlapsLockBug, r.OverlapsExpiredHolder, r.OverlapsAmbiguous, r.Incidents, r.IncidentsLockBug, r.IncidentsAmbiguous,
		r.StaleAccepted, r.StaleRejected, r.LostUpdates, r.TokenRegressions, r.ContendedGrants, r.ValidityShort, r.ValidityLong}
}

func TestConstructedHistories(t *testing.T) {
	for _, tc := range []struct {
		name         string
		build        func(b *builder)
		want         counts
		linear       results.Verdict
		fenced       results.Verdict
		fencedReason string
	}{{
		name: "a clean run: sections one after another",
		build: func(b *builder) {
			for i := range 5 {
				b.cycle(i%2, "k", int64(i)*10, uint64(i+1), int64(i))
			}
		},
		linear: results.Linearizable, fenced: results.Linearizable,
	}, {
		name: "two holders at once while the first lease is valid: a lock bug, stale write, lost update",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 1000)
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 0, 3, 0, 1000)
			b.read(2, "k", c, 4, 0)
			b.write(1, "k", a, 5, 1) // a was superseded by c: stale
			b.end(1, "k", a, 6)
			b.release(1, "k", a, 7, 8, OK)
			b.write(2, "k", c, 9, 1) // c read 0 too: a's increment is lost
			b.end(2, "k", c, 10)
			b.release(2, "k", c, 11, 12, OK)
		},
		want:   counts{Overlaps: 1, LockBug: 1, Incidents: 1, IncidentsLockBug: 1, StaleAccepted: 1, Lost: 1, Contended: 1},
		linear: results.NotLinearizable, fenced: results.Unknown, fencedReason: "the backend issues no fencing tokens",
	}, {
		name: "a paused holder outlives its lease and the next one is fenced off: an expired holder, no stale write lands",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 5, 100) // valid until 100 ms
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 50, 150, 6, 1150) // granted after a's lease ended
			b.read(2, "k", c, 151, 0)
			b.write(2, "k", c, 152, 1)
			b.end(2, "k", c, 153)
			b.release(2, "k", c, 154, 155, OK)
			b.reject(1, "k", a, 300, 1) // a wakes: its token is below 6
			b.end(1, "k", a, 301)
			b.release(1, "k", a, 302, 303, Fail)
		},
		want:   counts{Overlaps: 1, Expired: 1, Incidents: 1, StaleRejected: 1},
		linear: results.NotLinearizable, fenced: results.Linearizable,
	}, {
		name: "a paused holder overtaken by three grants in turn is one incident",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 1, 100)
			b.read(1, "k", a, 2, 0)
			for i := range int64(3) {
				b.cycle(2, "k", 200+10*i, uint64(2+i), i)
			}
			b.reject(1, "k", a, 400, 1)
			b.end(1, "k", a, 401)
			b.release(1, "k", a, 402, 403, Fail)
		},
		want:   counts{Overlaps: 3, Expired: 3, Incidents: 1, StaleRejected: 1},
		linear: results.NotLinearizable, fenced: results.Linearizable,
	}, {
		name: "three holders at once are two overlaps in one incident",
		build: func(b *builder) {
			var s []int64
			for p := range 3 {
				s = append(s, b.grant(p, "k", 0, int64(p)+1, 0, -1))
			}
			for p := range 3 {
				b.end(p, "k", s[p], 10+int64(p))
			}
		},
		want:   counts{Overlaps: 2, LockBug: 2, Incidents: 1, IncidentsLockBug: 1, Contended: 2},
		linear: results.NotLinearizable, fenced: results.Unknown, fencedReason: "the backend issues no fencing tokens",
	}, {
		name: "an acquire of unknown outcome, then someone else is granted: linearizable (it may not have taken effect)",
		build: func(b *builder) {
			b.acquireFailed(1, "k", 0, 500, Info) // timed out
			b.cycle(2, "k", 600, 1, 0)
			b.acquireFailed(3, "k", 700, 701, Fail) // refused: did not happen
		},
		linear: results.Linearizable, fenced: results.Linearizable,
	}, {
		name: "a release of unknown outcome, then the next holder: linearizable",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 1, 1000)
			b.end(1, "k", a, 2)
			b.release(1, "k", a, 3, 500, Info)
			b.cycle(2, "k", 600, 2, 0)
		},
		linear: results.Linearizable, fenced: results.Linearizable,
	}, {
		name: "a holder that died inside its section holds nothing after: no overlap with the next grant",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 1, 1000)
			b.died(1, "k", a, 50)
			b.cycle(2, "k", 1100, 2, 0)
		},
		linear: results.Linearizable, fenced: results.Linearizable,
	}, {
		name: "a token regression: linearizable as a mutex, not as a fenced mutex",
		build: func(b *builder) {
			b.cycle(1, "k", 0, 5, 0)
			b.cycle(2, "k", 10, 3, 1)
		},
		want:   counts{Regressions: 1},
		linear: results.Linearizable, fenced: results.NotLinearizable,
	}, {
		name: "concurrent grants may come back in either order: no regression in real time",
		build: func(b *builder) {
			// Two acquires whose intervals overlap: the judge heard of
			// token 4 first, but 3 was granted first: its own lease
			// ended at 5, before 4's Acquire returned (order).
			a := b.grant(1, "k", 0, 10, 4, 11)
			b.end(1, "k", a, 12)
			b.release(1, "k", a, 13, 14, OK)
			c := b.grant(2, "k", 1, 20, 3, 5) // its lease had ended before it heard: no overlap either way
			b.end(2, "k", c, 21)
			b.release(2, "k", c, 22, 23, Fail)
		},
		want:   counts{Contended: 1},
		linear: results.Linearizable, fenced: results.Linearizable,
	}, {
		name: "a first token of 0 is a token (ZooKeeper's first sequence number): fenced-linearizable, not unknown",
		build: func(b *builder) {
			b.cycle(1, "k", 0, 0, 0)
			b.ops[0].HasToken = true
			b.cycle(2, "k", 10, 1, 1)
		},
		linear: results.Linearizable, fenced: results.Linearizable,
	}, {
		name: "a token of 0 after token 0 is a regression",
		build: func(b *builder) {
			b.cycle(1, "k", 0, 0, 0)
			b.cycle(2, "k", 10, 0, 1)
			for i := range b.ops {
				b.ops[i].HasToken = b.ops[i].F != Release
			}
		},
		want:   counts{Regressions: 1},
		linear: results.Linearizable, fenced: results.NotLinearizable,
	}, {
		name: "a lease that reports less than its contract does not excuse the lock: the line is the contract's",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 1, 1000) // promised until 1 s...
			b.reported(50)                      // ...but its lease said 50 ms
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 100, 101, 2, 1100)
			b.end(2, "k", c, 102)
			b.release(2, "k", c, 103, 104, OK)
			b.end(1, "k", a, 200)
		},
		want:   counts{Overlaps: 1, LockBug: 1, Incidents: 1, IncidentsLockBug: 1, ValidityShort: 1},
		linear: results.NotLinearizable, fenced: results.Linearizable,
	}, {
		name: "a lease that reports more than its contract is a departure; the grant after the contract's line is an expired holder",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 1, 100)
			b.reported(5000)
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 200, 201, 2, 300)
			b.end(2, "k", c, 202)
			b.release(2, "k", c, 203, 204, OK)
			b.end(1, "k", a, 400)
		},
		want:   counts{Overlaps: 1, Expired: 1, Incidents: 1, ValidityLong: 1},
		linear: results.NotLinearizable, fenced: results.Linearizable,
	}, {
		name: "a grant inside the clock uncertainty of the contract line is ambiguous, neither lock bug nor expired holder",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 10, 1, 100) // called within [0, 8]: line within [100, 108]
			b.took(2)
			b.read(1, "k", a, 11, 0)
			c := b.grant(2, "k", 90, 105, 2, 1090) // returned within [100, 105]
			b.took(10)
			b.end(2, "k", c, 106)
			b.release(2, "k", c, 107, 108, OK)
			b.end(1, "k", a, 300)
		},
		want:   counts{Overlaps: 1, Ambiguous: 1, Incidents: 1, IncidentsAmbiguous: 1},
		linear: results.NotLinearizable, fenced: results.Linearizable,
	}, {
		name: "an incident is as bad as its worst overlap",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 1, 100)
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 150, 151, 2, 1150) // after a's line: expired holder
			d := b.grant(3, "k", 152, 153, 3, 1152) // before c's: lock bug
			b.end(2, "k", c, 154)
			b.end(3, "k", d, 155)
			b.end(1, "k", a, 156)
		},
		want:   counts{Overlaps: 2, Expired: 1, LockBug: 1, Incidents: 1, IncidentsLockBug: 1},
		linear: results.NotLinearizable, fenced: results.Linearizable,
	}, {
		name: "a grant is contended while another client's acquire of its key is in progress",
		build: func(b *builder) {
			b.acquireFailed(3, "k", 0, 2, Fail) // refused before the first grant: not waiting at it
			a := b.grant(1, "k", 1, 3, 1, 1000)
			b.end(1, "k", a, 4)
			b.release(1, "k", a, 5, 6, OK)
			c := b.grant(2, "k", 2, 7, 2, 1000) // waited across a's grant
			b.end(2, "k", c, 8)
			b.release(2, "k", c, 9, 10, OK)
			d := b.grant(1, "other", 11, 12, 1, 1000) // another key's waiters do not count
			b.end(1, "other", d, 13)
			b.acquireFailed(2, "other", 11, 14, Fail)
		},
		want:   counts{Contended: 2},
		linear: results.Linearizable, fenced: results.Linearizable,
	}, {
		name: "keys are judged apart",
		build: func(b *builder) {
			a := b.grant(1, "x", 0, 1, 0, -1)
			c := b.grant(2, "y", 0, 1, 0, -1)
			b.end(1, "x", a, 5)
			b.end(2, "y", c, 5)
			b.release(1, "x", a, 6, 7, OK)
			b.release(2, "y", c, 6, 7, OK)
		},
		linear: results.Linearizable, fenced: results.Unknown, fencedReason: "the backend issues no fencing tokens",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{}
			tc.build(b)
			r := Check(b.ops, "", true)
			if got := countsOf(r); got != tc.want {
				t.Errorf("counts %+v, want %+v\nexamples: %q", got, tc.want, r.Examples)
			}
			if v := Linearizable(b.ops, 10*time.Second); v.Result != tc.linear {
				t.Errorf("mutex model: %s (%s), want %s", v.Result, v.Reason, tc.linear)
			}
			v := LinearizableFenced(b.ops, 10*time.Second)
			if v.Result != tc.fenced || (tc.fencedReason != "" && v.Reason != tc.fencedReason) {
				t.Errorf("fenced model: %s (%s), want %s (%s)", v.Result, v.Reason, tc.fenced, tc.fencedReason)
			}
		})
	}
}

func TestNotLinearizableSaysWhere(t *testing.T) {
	b := &builder{}
	b.cycle(1, "ok", 0, 0, 0)
	a := b.grant(1, "bad", 0, 1, 0, -1)
	c := b.grant(2, "bad", 2, 3, 0, -1)
	b.end(1, "bad", a, 4)
	b.end(2, "bad", c, 5)
	v := Linearizable(b.ops, 10*time.Second)
	if v.Result != results.NotLinearizable {
		t.Fatalf("verdict %s", v.Result)
	}
	if want := `key "bad"`; !contains(v.Reason, want) {
		t.Fatalf("reason %q does not name %s", v.Reason, want)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestFileRoundTrip(t *testing.T) {
	b := &builder{}
	for i := range 100 {
		b.cycle(i%3, "k", int64(i)*10, uint64(i+1), int64(i))
	}
	b.acquireFailed(4, "k", 5000, 5100, Info)
	path := filepath.Join(t.TempDir(), "h", "case.jsonl.gz")
	if err := WriteFile(path, b.ops); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b.ops) {
		t.Fatalf("read back %d ops, different from the %d written", len(got), len(b.ops))
	}
}

// TestLeaseEndsTellWarnedFromSilent: a paused holder whose lease told it
// that it had ended before it wrote is a warned stale writer (a careful
// client would have held back); a holder whose key a restart lost, its
// lease still valid as far as it knew, writes silently.
func TestLeaseEndsTellWarnedFromSilent(t *testing.T) {
	b := &builder{}
	// Warned: a's lease expires during its pause; it learns it at 300 ms
	// and writes all the same, fenced off.
	a := b.grant(1, "k", 0, 1, 1, 100)
	b.read(1, "k", a, 2, 0)
	c := b.grant(2, "k", 150, 151, 2, 1150)
	b.end(2, "k", c, 152)
	b.release(2, "k", c, 153, 154, OK)
	b.section(LeaseEnd, OK, 1, "k", a, 300, 0)
	b.section(LeaseEnd, OK, 1, "k", a, 301, 0) // told twice: one end
	b.reject(1, "k", a, 302, 1)
	b.end(1, "k", a, 303)
	// Silent: d's key went with a restart while its lease was valid.
	d := b.grant(1, "j", 400, 401, 1, 1400)
	b.read(1, "j", d, 402, 0)
	e := b.grant(2, "j", 410, 411, 2, 1410)
	b.end(2, "j", e, 412)
	b.write(1, "j", d, 420, 1)
	b.end(1, "j", d, 421)
	r := Check(b.ops, "", true)
	if r.LeaseEnds != 1 || r.StaleTold != 1 || r.StaleSilent != 1 || r.OverlapsLockBug != 1 || r.OverlapsExpiredHolder != 1 {
		t.Fatalf("lease ends %d, stale writes told %d silent %d, overlaps lock bug %d expired %d; want 1 each",
			r.LeaseEnds, r.StaleTold, r.StaleSilent, r.OverlapsLockBug, r.OverlapsExpiredHolder)
	}
	if v := Linearizable(b.ops, 10*time.Second); v.Result != results.NotLinearizable {
		t.Errorf("mutex verdict %s: lease ends must not hide the overlaps", v.Result)
	}
}
