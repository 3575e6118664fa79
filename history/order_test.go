package history

import "testing"

// returnedBy sets the latest the last grant's Acquire returned, by its
// client's clock mapped to the judge's (ms): what the judge records from
// the offset's upper bound.
func (b *builder) returnedBy(at int64) { b.ops[len(b.ops)-1].Returned = at * ms }

// TestLateReportOrderedByReturn is the late-report question (issue 30
// §5): a holder stopped between its Acquire's return and its grant's
// report reaches the judge after a grant that really came later. Ordered
// by arrival (as the counter did), the late grant was judged against the
// later one's contract, a false lock bug; ordered by the returns' bounds,
// it is the earlier grant, and the pair is judged the right way round.
func TestLateReportOrderedByReturn(t *testing.T) {
	// late builds: process 1's Acquire called at 0 returns at 5 ms on its
	// clock (promise 100 ms), then it stops; process 2 is granted at 150
	// (after the line) and reported at once; process 1's report arrives
	// at 160 (mapped return ≤ returned, 0: unknown), while 2 holds.
	late := func(b *builder, grantB, returned int64) {
		b.next = 1
		b.add(Op{Process: 1, F: Acquire, Type: OK, Key: "k", Section: 1, Invoke: 0, Complete: 160 * ms,
			WorkerInvoke: base, WorkerComplete: base + 5*ms, Token: 1, HasToken: true,
			ValidUntil: 100 * ms, WorkerValidUntil: base + 100*ms, Promise: 100 * ms, MaxValidity: 100 * ms, Returned: returned * ms})
		// b's report came first: move a's after it.
		a := b.ops[0]
		b.ops = b.ops[:0]
		s := b.grant(2, "k", grantB-10, grantB, 2, grantB+1000)
		b.read(2, "k", s, grantB+1, 0)
		a.Index = len(b.ops)
		b.ops = append(b.ops, a)
		b.read(1, "k", 1, 161, 0)
		b.reject(1, "k", 1, 162, 1)
		b.end(1, "k", 1, 163)
		b.write(2, "k", s, 200, 1)
		b.end(2, "k", s, 201)
	}
	for _, tc := range []struct {
		name    string
		grantB  int64 // when the second grant returned (ms)
		mapped  int64 // process 1's mapped return (ms); 0: unknown
		want    Class
		lockBug int64
	}{
		{"the late grant returned first, by its clock: an expired holder", 150, 6, ExpiredHolder, 0},
		{"the order unknown (no clock offset): ambiguous, not a lock bug", 150, 0, Ambiguous, 0},
		{"a real double grant reported late is still a lock bug", 60, 6, LockBug, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			late(&b, tc.grantB, tc.mapped)
			r := Check(b.ops, "", true)
			if r.Overlaps != 1 || r.OverlapsLockBug != tc.lockBug || len(r.Episodes) != 1 || r.Episodes[0].Class != tc.want {
				t.Errorf("overlaps %d (lock bug %d), episodes %+v; want one %s\n%v", r.Overlaps, r.OverlapsLockBug, r.Episodes, tc.want, r.Examples)
			}
			// The late holder's write is the stale one, rejected; the
			// later holder's tokens and writes are in order.
			if tc.mapped > 0 && (r.StaleAccepted != 0 || r.StaleRejected != 1 || r.TokenRegressions != 0 || r.RejectedCurrent != 0) {
				t.Errorf("stale accepted %d, rejected %d, token regressions %d, rejected current %d; want 0, 1, 0, 0\n%v",
					r.StaleAccepted, r.StaleRejected, r.TokenRegressions, r.RejectedCurrent, r.Examples)
			}
		})
	}
}

// TestPromiseFromWinningAttempt: Redlock counts a grant's validity from
// its winning attempt, which retries inside Acquire can put long after
// the call, and its lease says so (ValidUntil = attempt + TTL − drift).
// The line moves there: a second grant before it is a lock bug, however
// long ago the call was. It never moves earlier than the call's, and not
// past the return's.
func TestPromiseFromWinningAttempt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reported int64 // the first lease's ValidUntil (ms)
		grantB   int64 // when the second grant returned (ms)
		want     Class
		long     int64
	}{
		{"won at 300 of a call at 0, second grant at 350: lock bug", 400, 350, LockBug, 0},
		{"won at 300, second grant at 450: expired holder", 400, 450, ExpiredHolder, 0},
		{"a lease claiming past the return plus its promise is capped there", 1000, 450, ExpiredHolder, 1},
		{"a lease reporting less than the call's promise does not move the line earlier", 50, 80, LockBug, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			a := b.grant(1, "k", 0, 310, 1, 100) // promise 100 ms from the call
			b.reported(tc.reported)
			b.read(1, "k", a, 311, 0)
			s := b.grant(2, "k", tc.grantB-5, tc.grantB, 2, tc.grantB+1000)
			b.read(2, "k", s, tc.grantB+1, 0)
			b.end(1, "k", a, tc.grantB+2)
			b.end(2, "k", s, tc.grantB+3)
			r := Check(b.ops, "", true)
			if len(r.Episodes) != 1 || r.Episodes[0].Class != tc.want || r.ValidityLong != tc.long {
				t.Errorf("episodes %+v, validity long %d; want one %s, %d\n%v", r.Episodes, r.ValidityLong, tc.want, tc.long, r.Examples)
			}
		})
	}
}

// TestLandingAtGranted: a worker armed inside Acquire stops itself once
// Acquire returned, before it reports the grant; the report reaches the
// judge after the resume. The landing is "granted": the return certainly
// came before the resume (so before the stop), the report after the stop.
func TestLandingAtGranted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		returned int64 // the judge's mapped return (ms); 0: unknown
		want     Point
	}{
		{"the return mapped by the clock offset", 20, PointGranted},
		{"no clock offset: the bounds do not tell", 0, PointUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{}
			s := b.grant(1, "k", 10, 200, 0, 1000)
			b.took(10)
			b.returnedBy(tc.returned)
			b.read(1, "k", s, 201, 0)
			b.write(1, "k", s, 202, 1)
			b.end(1, "k", s, 203)
			b.pause(1, 15, 150*ms, PointGranted, 0) // armed at 15, seen stopped at 16
			b.ops[len(b.ops)-1].Complete = 21 * ms
			got := Landings(b.ops)
			if len(got) != 1 || got[0].Landed != tc.want || got[0].Hit() != (tc.want == PointGranted) {
				t.Fatalf("Landings = %+v, want landed at %s", got, tc.want)
			}
		})
	}
}

// TestLateReportEndsItsIncident: the late holder ends first, the later
// one holds on alone: the incident is over (it is the newest holder in
// the lock's order, though its grant reached the judge first), and the
// next overtaking is an incident of its own.
func TestLateReportEndsItsIncident(t *testing.T) {
	var b builder
	b.next = 1
	late := Op{Process: 1, F: Acquire, Type: OK, Key: "k", Section: 1, Invoke: 0, Complete: 160 * ms,
		WorkerInvoke: base, WorkerComplete: base + 5*ms, Token: 1, HasToken: true,
		ValidUntil: 100 * ms, WorkerValidUntil: base + 100*ms, Promise: 100 * ms, MaxValidity: 100 * ms, Returned: 6 * ms}
	s := b.grant(2, "k", 140, 150, 2, 240) // after the late one's line
	b.read(2, "k", s, 151, 0)
	late.Index = len(b.ops)
	b.ops = append(b.ops, late)
	b.end(1, "k", 1, 163)                  // the late holder gone: 2 holds alone
	c := b.grant(3, "k", 300, 400, 3, 500) // 2 paused past its line: a second incident
	b.end(2, "k", s, 401)
	b.end(3, "k", c, 402)
	r := Check(b.ops, "", true)
	if r.Incidents != 2 || r.IncidentsExpiredHolder != 2 {
		t.Errorf("incidents %d (expired holder %d), episodes %+v; want 2, 2", r.Incidents, r.IncidentsExpiredHolder, r.Episodes)
	}
}

// TestStoppedInsideAcquire: a holder stopped inside Acquire after the
// lock granted it (etcd, client-pause?at=acquire of 3 leases) returns
// long after its lease ended, while a grant the lock made after that end
// is active: its grant came first in the lock's order, however late its
// Acquire returned, and its section is an expired holder's. A late return
// whose lease had not ended is judged by the returns, as before: a double
// grant.
func TestStoppedInsideAcquire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		valid   int64 // the stopped holder's ValidUntil (ms)
		want    Class
		lockBug int64
	}{
		{"its lease ended inside the stop: an expired holder", 100, ExpiredHolder, 0},
		{"its lease still running at its return: a double grant", 400, LockBug, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			b.next = 1
			stopped := Op{Process: 1, F: Acquire, Type: OK, Key: "k", Section: 1, Invoke: 0, Complete: 301 * ms,
				WorkerInvoke: base, WorkerComplete: base + 300*ms, Token: 1, HasToken: true,
				ValidUntil: tc.valid * ms, WorkerValidUntil: base + tc.valid*ms, Promise: 100 * ms, MaxValidity: 100 * ms,
				Returned: 300 * ms}
			s := b.grant(2, "k", 140, 150, 2, 1150)
			b.read(2, "k", s, 151, 0)
			stopped.Index = len(b.ops)
			b.ops = append(b.ops, stopped)
			b.read(1, "k", 1, 302, 0)
			b.write(1, "k", 1, 303, 1)
			b.end(1, "k", 1, 304)
			b.write(2, "k", s, 310, 2)
			b.end(2, "k", s, 311)
			r := Check(b.ops, "", true)
			if r.Overlaps != 1 || r.OverlapsLockBug != tc.lockBug || len(r.Episodes) != 1 || r.Episodes[0].Class != tc.want {
				t.Errorf("overlaps %d (lock bug %d), episodes %+v; want one %s\n%v", r.Overlaps, r.OverlapsLockBug, r.Episodes, tc.want, r.Examples)
			}
			if tc.want == ExpiredHolder && (r.StaleAccepted != 1 || r.TokenRegressions != 0) {
				t.Errorf("stale accepted %d, token regressions %d; want the stopped holder's write stale and tokens in order\n%v",
					r.StaleAccepted, r.TokenRegressions, r.Examples)
			}
		})
	}
}

// TestReturnAfterTheLeaseOrdersNothing: a grant whose Acquire returned
// about when its own lease ended (a loaded machine: the call took longer
// than the lease) says nothing of its place among the grants the lock
// made once that lease had ended, which may return before it does. Its
// successor, granted after the lease, returned first and reported late,
// carries the higher token and writes as the current holder: no token
// regression, no stale write. (Seen under a 300 ms lease with both CPUs
// loaded: one false regression and one false stale write in a case
// without faults.)
func TestReturnAfterTheLeaseOrdersNothing(t *testing.T) {
	var b builder
	// Process 1: called at [0, 50] ms, its call took 350 ms on its clock,
	// returned by 400 (its report); promise 300 ms, so its line is at
	// [300, 350], reaching into its return [350, 400].
	b.add(Op{Process: 1, F: Acquire, Type: OK, Key: "k", Section: 1, Invoke: 0, Complete: 400 * ms,
		WorkerInvoke: base, WorkerComplete: base + 350*ms, Token: 1, HasToken: true, Promise: 300 * ms, MaxValidity: 300 * ms})
	b.add(Op{Process: 1, F: LeaseEnd, Type: OK, Key: "k", Section: 1, Invoke: 401 * ms, Complete: 401 * ms})
	b.end(1, "k", 1, 402)
	// Process 2: called at 310, returned at 315–320 by its clock mapped
	// to the judge's, reported late at 450; then it reads and writes.
	b.add(Op{Process: 2, F: Acquire, Type: OK, Key: "k", Section: 2, Invoke: 310 * ms, Complete: 450 * ms, Returned: 320 * ms,
		WorkerInvoke: base + 310*ms, WorkerComplete: base + 315*ms, Token: 2, HasToken: true, Promise: 300 * ms, MaxValidity: 300 * ms})
	b.read(2, "k", 2, 451, 0)
	b.write(2, "k", 2, 452, 1)
	b.end(2, "k", 2, 453)
	r := Check(b.ops, "", true)
	if r.TokenRegressions != 0 || r.StaleAccepted != 0 || r.StaleRejected != 0 || r.Overlaps != 0 {
		t.Errorf("token regressions %d, stale %d accepted %d rejected, overlaps %d; want none\n%v",
			r.TokenRegressions, r.StaleAccepted, r.StaleRejected, r.Overlaps, r.Examples)
	}
	// The same successor with a token not above its predecessor's is a
	// regression still.
	b.ops[3].Token = 1
	if r := Check(b.ops, "", true); r.TokenRegressions != 1 {
		t.Errorf("a successor's token 1 after token 1: %d token regressions, want 1", r.TokenRegressions)
	}
}
