package history

// Point is a moment of a client's cycle — acquire, section, release,
// idle — where a pause of its process can be aimed, and where one lands.
type Point string

// The points of a client's cycle, in its order. The judge stops a client
// exactly at before-read, after-read and after-write (in its answer to
// the grant, the read and the write, which the client waits for); a
// pause aimed inside Acquire or inside an Extend strikes at a moment the
// nemesis picks, and lands where the client's own operations around it
// say (Landings).
const (
	// PointAcquire is inside Acquire: called, not yet returned.
	PointAcquire Point = "acquire"
	// PointGranted is after Acquire returned, before its grant reached
	// the judge: a holder that cannot know yet that it is late, whose
	// grant the judge hears of only when it runs again. The worker stops
	// itself there when armed (the window lasts microseconds).
	PointGranted Point = "granted"
	// PointBeforeRead is after Acquire returned, before the section's
	// first access to the resource (under the cas guard, before its mark).
	PointBeforeRead Point = "before-read"
	// PointAfterRead is between the section's read and its write: the
	// hold.
	PointAfterRead Point = "after-read"
	// PointAfterWrite is after the write, before the section ends.
	PointAfterWrite Point = "after-write"
	// PointRelease is after the section ended: inside Release, or about
	// to call it.
	PointRelease Point = "release"
	// PointIdle is between sections: after Release (or a failed acquire)
	// returned, before the next Acquire (the think time).
	PointIdle Point = "idle"
	// PointExtend is inside an Extend of the client's lease, by its holder
	// or its auto-extend watchdog, which runs beside the client's cycle:
	// a pause lands there as well as at a point of the cycle
	// (Landing.InExtend).
	PointExtend Point = "extend"
	// PointUnknown is where a pause landed when the clock bounds around
	// it do not tell, or its client's operations are missing.
	PointUnknown Point = "unknown"
)

// Points lists the points a pause can be aimed at, in the cycle's order.
var Points = []Point{PointAcquire, PointGranted, PointBeforeRead, PointAfterRead, PointAfterWrite, PointExtend}

// Landing is where one pause of a client's process landed.
type Landing struct {
	// Index is the pause's op in the history.
	Index   int `json:"index"`
	Process int `json:"process"`
	// At is when the stop was asked (judge ns since the case start), and
	// Length how long the process stayed stopped at least.
	At     int64 `json:"at"`
	Length int64 `json:"length"`
	// Aimed is where the pause was aimed; Landed the point of the
	// client's cycle it stopped in; Section the section it landed in (0
	// between sections).
	Aimed   Point `json:"aimed"`
	Landed  Point `json:"landed"`
	Section int64 `json:"section,omitempty"`
	// InExtend is set when an extension of the client's lease was in
	// flight at the stop.
	InExtend bool `json:"in_extend,omitempty"`
}

// Hit reports whether the pause landed where it was aimed.
func (l Landing) Hit() bool {
	if l.Aimed == PointExtend {
		return l.InExtend
	}
	return l.Landed == l.Aimed
}

// Landings locates every pause of a history in its client's cycle. A
// pause the judge made in its answer to a grant, read or write (its op
// names the section) landed at that point exactly; any other landed
// where its client certainly was at the stop, which came between the
// moment it was asked and the moment the process was seen stopped, by
// the bounds of its own operations: inside an acquire, an extension or a
// release whose call certainly spans it, or between two of its section's
// events at the judge; PointUnknown when the bounds do not tell. A
// stopped process does nothing: an operation of its that returned after
// it was seen stopped returned after it was resumed, no earlier than the
// pause's Length after the ask, so one that began before that moment
// began before the stop.
func Landings(ops []Op) []Landing {
	byProc := map[int][]Op{}
	var pauses []Op
	for _, o := range ops {
		if o.F == Pause {
			if o.Type != Fail {
				pauses = append(pauses, o)
			}
			continue
		}
		byProc[o.Process] = append(byProc[o.Process], o)
	}
	var out []Landing
	for _, p := range pauses {
		own := byProc[p.Process]
		l := Landing{Index: p.Index, Process: p.Process, At: p.Invoke, Length: p.Length, Aimed: p.Point, Landed: PointUnknown}
		stop := pauseSpan{span{p.Invoke, p.Complete}, p.Length}
		for _, o := range own {
			if o.F == Extend && stop.spannedBy(o) {
				l.InExtend = true
			}
		}
		if p.Section > 0 {
			l.Landed, l.Section = p.Point, p.Section
		} else {
			l.Landed, l.Section = cyclePoint(own, stop)
		}
		out = append(out, l)
	}
	return out
}

// pauseSpan is a stop: known to lie between the ask and the moment the
// process was seen stopped, and followed by the resume no earlier than
// length after the ask.
type pauseSpan struct {
	span
	length int64
}

// ranBefore reports whether a moment t of the client's own (a call or a
// return) certainly came before the stop: before the resume, which no
// moment of the client's lies between the stop and.
func (p pauseSpan) ranBefore(t int64) bool { return t < p.lo+p.length }

// ranAfter reports whether a moment t of the client's own certainly came
// after the stop.
func (p pauseSpan) ranAfter(t int64) bool { return t > p.hi }

// spannedBy reports whether o's call certainly began before the stop and
// returned after it.
func (p pauseSpan) spannedBy(o Op) bool {
	return p.ranBefore(called(o).hi) && p.ranAfter(returned(o).lo)
}

// cyclePoint returns the point of its cycle at which a client with ops
// own (in the history's order, which is its own order for everything but
// its extensions) certainly was throughout stop, and the section.
func cyclePoint(own []Op, stop pauseSpan) (Point, int64) {
	const never = int64(1) << 62
	type section struct{ read, write, end, released int64 }
	sections := map[int64]*section{}
	var acquires []Op
	for _, o := range own {
		if o.F == Acquire {
			acquires = append(acquires, o)
		}
		if o.Section == 0 {
			continue
		}
		s := sections[o.Section]
		if s == nil {
			s = &section{never, never, never, never}
			sections[o.Section] = s
		}
		switch o.F {
		case Read:
			s.read = min(s.read, o.Complete)
		case Write:
			s.write = min(s.write, o.Complete)
		case End:
			s.end = min(s.end, o.Complete)
		case Release:
			if stop.spannedBy(o) {
				return PointRelease, o.Section
			}
			s.released = returned(o).lo
		}
	}
	// within reports whether the stop lies certainly after from and
	// before to: judge events, or the client's own moments (mine).
	within := func(from, to int64, mine bool) bool {
		if mine {
			return stop.ranBefore(from) && stop.ranAfter(to)
		}
		return from < stop.lo && stop.hi < to
	}
	idleFrom := -never // the client is idle from here until its next Acquire
	for i, q := range acquires {
		next := never
		if i+1 < len(acquires) {
			next = called(acquires[i+1]).lo
		}
		switch {
		case within(idleFrom, called(q).lo, true):
			return PointIdle, 0
		case stop.spannedBy(q):
			return PointAcquire, q.Section
		}
		idleFrom = returned(q).hi
		if q.Type != OK || sections[q.Section] == nil {
			if q.Type == OK {
				idleFrom = never // a grant whose section left no trace
			}
			continue
		}
		s := sections[q.Section]
		switch {
		case stop.ranBefore(returned(q).hi) && stop.hi < q.Complete:
			return PointGranted, q.Section // returned before the stop, reported after it
		case stop.ranBefore(returned(q).hi) && stop.hi < s.read:
			return PointBeforeRead, q.Section
		case within(s.read, s.write, false):
			return PointAfterRead, q.Section
		case within(s.write, s.end, false):
			return PointAfterWrite, q.Section
		case s.end < stop.lo && stop.ranAfter(min(s.released, next)):
			return PointRelease, q.Section
		}
		idleFrom = never
		if s.released != never {
			// The release's return, at the latest: returned.hi is its
			// Complete, which the judge recorded after the op.
			for _, o := range own {
				if o.F == Release && o.Section == q.Section {
					idleFrom = returned(o).hi
				}
			}
		}
	}
	if within(idleFrom, never, true) {
		return PointIdle, 0
	}
	return PointUnknown, 0
}
