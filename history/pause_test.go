package history

import (
	"reflect"
	"testing"
)

// extend records an extension by process p of section s called at inv
// and returned at cmp (ms), promising the key promise ms from its call,
// reported with the lease's new ValidUntil at inv+promise.
func (b *builder) extend(p int, key string, s, inv, cmp int64, t Type, promise int64) {
	o := Op{Process: p, F: Extend, Type: t, Key: key, Section: s, Invoke: inv * ms, Complete: cmp * ms,
		WorkerInvoke: base + inv*ms, WorkerComplete: base + cmp*ms, Promise: promise * ms, MaxValidity: promise * ms}
	if t == OK {
		o.ValidUntil, o.WorkerValidUntil = (inv+promise)*ms, base+(inv+promise)*ms
	}
	b.add(o)
}

// pause records a pause of process p asked at at (ms), seen stopped 1 ms
// later, for length (ns), aimed at point; section is set when the judge
// made it in its answer to that section's step.
func (b *builder) pause(p int, at, length int64, point Point, section int64) {
	b.add(Op{Process: p, F: Pause, Type: OK, Invoke: at * ms, Complete: (at + 1) * ms, Length: length, Point: point, Section: section})
}

func TestExtensionsDrawContractLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		want  counts
		// extends and failed are the extensions counted.
		extends, failed int64
	}{{
		name: "no extension: a grant past the first line is an expired holder",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 100)
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 50, 130, 0, 230)
			b.end(2, "k", c, 140)
			b.end(1, "k", a, 150)
		},
		want: counts{Overlaps: 1, Expired: 1, Incidents: 1},
	}, {
		name: "an extension reported after the later grant moves the line past it: a lock bug",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 100)
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 50, 130, 0, 230)
			b.end(2, "k", c, 140)
			b.extend(1, "k", a, 60, 61, OK, 100) // line at 160: c came before it
			b.end(1, "k", a, 150)
		},
		want:    counts{Overlaps: 1, LockBug: 1, Incidents: 1, IncidentsLockBug: 1},
		extends: 1,
	}, {
		name: "an extension granted while the later holder holds is a lock bug",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 100)
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 50, 130, 0, 230)
			b.extend(1, "k", a, 135, 136, OK, 100)
			b.end(2, "k", c, 140)
			b.end(1, "k", a, 150)
		},
		want:    counts{Overlaps: 1, LockBug: 1, Incidents: 1, IncidentsLockBug: 1},
		extends: 1,
	}, {
		name: "an extension refused moves nothing",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 100)
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 50, 130, 0, 230)
			b.extend(1, "k", a, 60, 61, Fail, 100)
			b.end(2, "k", c, 140)
			b.end(1, "k", a, 150)
		},
		want:    counts{Overlaps: 1, Expired: 1, Incidents: 1},
		extends: 1, failed: 1,
	}, {
		name: "an extension that failed after its holder began to release raced the release: not failed",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 100)
			b.read(1, "k", a, 2, 0)
			b.end(1, "k", a, 40)
			b.release(1, "k", a, 45, 47, OK)
			b.extend(1, "k", a, 44, 48, Info, 100)
		},
		extends: 1,
	}, {
		name: "an extension that failed before its holder began to release failed",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 100)
			b.read(1, "k", a, 2, 0)
			b.end(1, "k", a, 40)
			b.extend(1, "k", a, 42, 44, Fail, 100)
			b.release(1, "k", a, 45, 47, OK)
		},
		extends: 1, failed: 1,
	}, {
		name: "an extension after the later section ended is not in its way",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 100)
			b.read(1, "k", a, 2, 0)
			c := b.grant(2, "k", 50, 130, 0, 230)
			b.end(2, "k", c, 140)
			b.extend(1, "k", a, 145, 146, OK, 100)
			b.end(1, "k", a, 150)
		},
		want:    counts{Overlaps: 1, Expired: 1, Incidents: 1},
		extends: 1,
	}, {
		name: "an extension whose lease claims more than its lock gives departs from its contract",
		build: func(b *builder) {
			a := b.grant(1, "k", 0, 1, 0, 100)
			b.extend(1, "k", a, 60, 61, OK, 100)
			o := &b.ops[len(b.ops)-1]
			o.WorkerValidUntil += 50 * ms // 50 ms past the call plus its TTL
			b.end(1, "k", a, 150)
		},
		want:    counts{ValidityLong: 1},
		extends: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{}
			tc.build(b)
			r := Check(b.ops, "", false)
			got := countsOf(r)
			got.Contended = tc.want.Contended // not what this test is about
			if got != tc.want {
				t.Errorf("counts = %+v, want %+v; examples %q", got, tc.want, r.Examples)
			}
			if r.Extends != tc.extends || r.ExtendsFailed != tc.failed {
				t.Errorf("extends %d (failed %d), want %d (%d)", r.Extends, r.ExtendsFailed, tc.extends, tc.failed)
			}
		})
	}
}

func TestLandings(t *testing.T) {
	// Process 1's cycle: idle until 10, Acquire 10–20 (returned at 20 on
	// its clock, the grant reaching the judge at 21), read at 30, write at
	// 40, end at 50, Release 55–60, idle until its next Acquire at 70–80,
	// which does not grant; an extension of section 1 runs 32–36. The
	// pauses are short (half a millisecond), as they must be for the
	// cycle to go on as it does; see the case of a long one below.
	cycle := func(b *builder) {
		s := b.grant(1, "k", 10, 21, 0, 1000)
		b.took(10)
		b.read(1, "k", s, 30, 0)
		b.write(1, "k", s, 40, 1)
		b.end(1, "k", s, 50)
		b.release(1, "k", s, 55, 60, OK)
		r := &b.ops[len(b.ops)-1]
		r.WorkerInvoke, r.WorkerComplete = base+55*ms, base+60*ms
		b.acquireFailed(1, "k", 70, 80, Fail)
		b.extend(1, "k", s, 32, 36, OK, 1000)
	}
	const short = ms / 2
	for _, tc := range []struct {
		name    string
		at      int64
		aimed   Point
		section int64
		want    Landing
	}{
		{"before the first acquire", 2, PointAcquire, 0, Landing{Landed: PointIdle}},
		{"inside Acquire", 12, PointAcquire, 0, Landing{Landed: PointAcquire, Section: 1}},
		{"granted, before the read", 24, PointAcquire, 0, Landing{Landed: PointBeforeRead, Section: 1}},
		{"in the hold", 27 + 10, PointExtend, 0, Landing{Landed: PointAfterRead, Section: 1}},
		{"inside the extension, in the hold", 33, PointExtend, 0, Landing{Landed: PointAfterRead, Section: 1, InExtend: true}},
		{"after the write", 44, PointAcquire, 0, Landing{Landed: PointAfterWrite, Section: 1}},
		{"ended, about to release", 52, PointAcquire, 0, Landing{Landed: PointRelease, Section: 1}},
		{"inside Release", 57, PointAcquire, 0, Landing{Landed: PointRelease, Section: 1}},
		{"thinking", 64, PointAcquire, 0, Landing{Landed: PointIdle}},
		{"inside an acquire that failed", 74, PointAcquire, 0, Landing{Landed: PointAcquire}},
		{"after the last acquire", 90, PointAcquire, 0, Landing{Landed: PointIdle}},
		{"the stop overlaps the read: the bounds do not tell", 29, PointAcquire, 0, Landing{Landed: PointUnknown}},
		{"made by the judge at its answer", 30, PointAfterRead, 1, Landing{Landed: PointAfterRead, Section: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{}
			cycle(b)
			b.pause(1, tc.at, short, tc.aimed, tc.section)
			got := Landings(b.ops)
			want := tc.want
			want.Index, want.Process, want.At, want.Length, want.Aimed = len(b.ops)-1, 1, tc.at*ms, short, tc.aimed
			if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
				t.Fatalf("Landings = %+v, want [%+v]", got, want)
			}
			if r := Check(b.ops, "", false); !reflect.DeepEqual(r.Pauses, got) {
				t.Fatalf("Check's Pauses = %+v, want %+v", r.Pauses, got)
			}
		})
	}
}

// TestALongPauseTellsMore: a stopped process does nothing, so a call
// that returned after the process was seen stopped began before the
// stop if it began before the resume — though its start alone is known
// only to have come after the stop was asked.
func TestALongPauseTellsMore(t *testing.T) {
	b := &builder{}
	s := b.grant(1, "k", 0, 1, 0, 1000)
	b.read(1, "k", s, 2, 0)
	// The extension began between 10 and 14 on the judge's clock, and
	// returned between 516 and 520: it took 506 ms on its client's.
	b.add(Op{Process: 1, F: Extend, Type: OK, Key: "k", Section: s, Invoke: 10 * ms, Complete: 520 * ms,
		WorkerInvoke: base + 14*ms, WorkerComplete: base + 520*ms, Promise: 1000 * ms, MaxValidity: 1000 * ms})
	b.pause(1, 12, 500*ms, PointExtend, 0) // asked at 12: the extension may have begun after
	b.write(1, "k", s, 530, 1)
	b.end(1, "k", s, 531)
	got := Landings(b.ops)
	if len(got) != 1 || !got[0].InExtend || got[0].Landed != PointAfterRead {
		t.Fatalf("Landings = %+v, want the pause inside the extension, in the hold", got)
	}
	// Had the pause been short, the extension could have begun after it.
	b.ops[3].Length = ms
	if got := Landings(b.ops); len(got) != 1 || got[0].InExtend {
		t.Fatalf("Landings of a short pause = %+v, want it not known to be inside the extension", got)
	}
}

func TestLandingHit(t *testing.T) {
	for _, tc := range []struct {
		l    Landing
		want bool
	}{
		{Landing{Aimed: PointAcquire, Landed: PointAcquire}, true},
		{Landing{Aimed: PointAcquire, Landed: PointIdle}, false},
		{Landing{Aimed: PointExtend, Landed: PointAfterRead, InExtend: true}, true},
		{Landing{Aimed: PointExtend, Landed: PointAfterRead}, false},
	} {
		if got := tc.l.Hit(); got != tc.want {
			t.Errorf("%+v.Hit() = %v, want %v", tc.l, got, tc.want)
		}
	}
}

// TestIncidentsOfLongHoldsDoNotChain: on a key that is never free (long
// holds, a waiter always ready), a holder paused past its lease, then
// another after it, are two incidents: the first ends when only the
// newest holder is left.
func TestIncidentsOfLongHoldsDoNotChain(t *testing.T) {
	b := &builder{}
	a := b.grant(1, "k", 0, 1, 0, 100)
	b.read(1, "k", a, 2, 0)
	c := b.grant(2, "k", 50, 130, 0, 230) // a paused past its lease
	b.read(2, "k", c, 131, 0)
	b.end(1, "k", a, 140)                  // a wakes and goes: c alone, the newest
	d := b.grant(3, "k", 100, 260, 0, 360) // c paused past its lease in turn
	b.end(2, "k", c, 270)
	b.end(3, "k", d, 280)
	r := Check(b.ops, "", false)
	if r.Overlaps != 2 || r.Incidents != 2 || r.IncidentsExpiredHolder != 2 {
		t.Fatalf("%d overlaps in %d incidents (%d expired holders), want 2 in 2", r.Overlaps, r.Incidents, r.IncidentsExpiredHolder)
	}
}
