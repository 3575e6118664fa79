// Package envelope finds where each lock breaks against the size of a
// fault: for a lock and a fault family (a client pause, a server clock
// jump), a search on the fault's size relative to the lease probes sizes
// with real cases, each a number of tested injections, and bisects on the
// size where lock bugs (and late writes under each guard) start. Its
// result is the largest size with no event in its tested injections, with
// the exact bound on the rate there, the smallest size with one, and the
// seed that replays each point (results.Envelope).
package envelope

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// ErrBudget is what a Prober returns when the search's time is spent: the
// search ends with the points it has.
var ErrBudget = errors.New("envelope: budget spent")

// Prober measures one size: n tested injections of the family's fault at
// size (in the family's unit) on the lock, with seed as the run's seed.
// It returns the point (Size, counts, Seeds); an error ends the point,
// ErrBudget the search.
type Prober interface {
	Probe(ctx context.Context, size float64, n int, seed uint64) (results.EnvelopePoint, error)
}

// ProberFunc is a Prober as a function.
type ProberFunc func(ctx context.Context, size float64, n int, seed uint64) (results.EnvelopePoint, error)

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, size float64, n int, seed uint64) (results.EnvelopePoint, error) {
	return f(ctx, size, n, seed)
}

// Search is a bisection on a Bernoulli boundary over a geometric grid of
// sizes from Min to Max, Resolution apart: it assumes an event's chance
// does not fall as the fault grows, probes the ends, then halves the
// bracket between the largest clean size and the smallest with the event,
// and before it stops tops the clean end up to SafeN tested injections,
// so that one lucky point does not move the boundary (if the top-up shows
// the event, that end joins the bracket's upper side and the bisection
// goes on below it).
type Search struct {
	Min, Max   float64
	Resolution float64
	// N is the tested injections per probe; SafeN those the safe end of a
	// boundary must have (at least N).
	N, SafeN int
	// Events are the events to bisect on, in order: results.EventLockBug,
	// then late writes (results.LateWriteEvent). Later events reuse the
	// points earlier ones probed.
	Events []string
	// Seed derives each probe's seed.
	Seed uint64
	// FromBelow starts at the smallest size, for a fault whose danger
	// shrinks as it grows (past some size it outlasts what it could break,
	// and nothing tests): its largest size, where the search would start,
	// tests nothing by design and costs the most.
	FromBelow bool
}

// Result is what a search found: the points and a boundary per event,
// with notes (why it stopped early).
type Result struct {
	Points     []results.EnvelopePoint
	Boundaries []results.Boundary
	// Edge is where the fault stops being a test, when the search met
	// sizes that tested nothing above sizes that did (or none that did).
	Edge  *results.TestedEdge
	Notes []string
}

// grid returns the sizes of the search: Min × Resolution^k up to Max
// (Max the last, also when it falls between).
func (s Search) grid() ([]float64, error) {
	switch {
	case !(s.Min > 0) || !(s.Max >= s.Min) || math.IsInf(s.Max, 0):
		return nil, fmt.Errorf("envelope: sizes %v–%v: want 0 < min ≤ max", s.Min, s.Max)
	case !(s.Resolution > 1) || math.IsInf(s.Resolution, 0):
		return nil, fmt.Errorf("envelope: resolution %v: want a ratio above 1", s.Resolution)
	case s.N < 1 || s.SafeN < s.N:
		return nil, fmt.Errorf("envelope: %d injections a probe, %d at the safe end: want 1 ≤ n ≤ safe n", s.N, s.SafeN)
	}
	var g []float64
	for k := 0; ; k++ {
		v := s.Min * math.Pow(s.Resolution, float64(k))
		if v >= s.Max*(1-1e-9) || k > 1000 {
			return append(g, s.Max), nil
		}
		g = append(g, round(v))
	}
}

// round keeps four significant digits, so that sizes read well and a
// replay's param is the size probed.
func round(v float64) float64 {
	if v == 0 {
		return 0
	}
	e := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*e) / e
}

// run is the state of one search.
type run struct {
	s      Search
	p      Prober
	sizes  []float64
	pts    map[int]*results.EnvelopePoint
	failed map[int]bool
	empty  map[int]int // probes of a size that tested nothing
	probes int
	out    bool // budget spent
	notes  []string
}

// Run searches with p and returns the points and boundaries. Only ctx's
// end is an error; a spent budget ends the search with what it has.
func (s Search) Run(ctx context.Context, p Prober) (Result, error) {
	sizes, err := s.grid()
	if err != nil {
		return Result{}, err
	}
	r := &run{s: s, p: p, sizes: sizes, pts: map[int]*results.EnvelopePoint{}, failed: map[int]bool{}, empty: map[int]int{}}
	// Every event's bracket first, then where the fault stops testing,
	// then the safe ends' top-ups: a search short of time spends it on
	// brackets, the cheaper evidence.
	if s.FromBelow {
		if _, err := r.ensure(ctx, 0, s.N); err != nil {
			return Result{}, err
		}
	}
	for _, topUp := range []bool{false, true} {
		for _, ev := range s.Events {
			if err := r.bisect(ctx, ev, topUp); err != nil {
				return Result{}, err
			}
		}
		if !topUp {
			if err := r.edge(ctx); err != nil {
				return Result{}, err
			}
		}
	}
	res := Result{Notes: r.notes, Edge: r.tested()}
	for k := range sizes {
		if pt := r.pts[k]; pt != nil {
			res.Points = append(res.Points, *pt)
		}
	}
	for _, ev := range s.Events {
		res.Boundaries = append(res.Boundaries, Boundary(res.Points, ev, s.Min, s.Resolution, s.SafeN))
	}
	return res, nil
}

// ensure gives size k at least n tested injections; false when it could
// not (budget, a failed probe).
func (r *run) ensure(ctx context.Context, k, n int) (bool, error) {
	for !r.out && !r.failed[k] {
		have := 0
		if pt := r.pts[k]; pt != nil {
			have = pt.Tested
		}
		if have >= n {
			return true, nil
		}
		seed := rand.New(rand.NewPCG(r.s.Seed, uint64(r.probes))).Uint64() | 1
		r.probes++
		pt, err := r.p.Probe(ctx, r.sizes[k], n-have, seed)
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case errors.Is(err, ErrBudget):
			r.out = true
			r.notes = append(r.notes, fmt.Sprintf("the budget ran out before size %g was probed", r.sizes[k]))
			return false, nil
		case err != nil:
			r.failed[k] = true
			r.notes = append(r.notes, fmt.Sprintf("size %g: %v", r.sizes[k], err))
		}
		pt.Size = r.sizes[k]
		r.merge(k, pt)
		if pt.Tested == 0 && err == nil {
			// No injection tested anything: once more, then give up on the size.
			r.empty[k]++
			if r.empty[k] >= 2 {
				r.failed[k] = true
				r.notes = append(r.notes, fmt.Sprintf("size %g: none of %d injections in two probes tested", r.sizes[k], r.pts[k].Injections))
			}
		}
	}
	return false, nil
}

// merge adds a probe's counts to size k's point.
func (r *run) merge(k int, pt results.EnvelopePoint) {
	have := r.pts[k]
	if have == nil {
		cp := pt
		cp.LateWrites = maps(pt.LateWrites)
		r.pts[k] = &cp
		return
	}
	have.Tested += pt.Tested
	have.Injections += pt.Injections
	have.LockBugs += pt.LockBugs
	if have.LateWrites == nil && len(pt.LateWrites) > 0 {
		have.LateWrites = map[string]int{}
	}
	for g, n := range pt.LateWrites {
		have.LateWrites[g] += n
	}
	have.Seeds = append(have.Seeds, pt.Seeds...)
	have.Replay = append(have.Replay, pt.Replay...)
	have.Histories = append(have.Histories, pt.Histories...)
	if pt.Invalid != "" {
		have.Invalid = pt.Invalid
	}
}

func maps(m map[string]int) map[string]int {
	if m == nil {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// seen reports whether size k showed ev, and whether it was probed.
func (r *run) seen(k int, ev string) (bool, bool) {
	pt := r.pts[k]
	if pt == nil || pt.Tested == 0 {
		return false, false
	}
	return pt.Count(ev) > 0, true
}

// bisect narrows ev's bracket to neighbouring sizes of the grid; with
// topUp it then gives the clean end SafeN tested injections, and goes on
// below it if they show ev.
func (r *run) bisect(ctx context.Context, ev string, topUp bool) error {
	top := len(r.sizes) - 1
	hi := -1 // smallest size known to show ev
	for k := range r.sizes {
		if s, ok := r.seen(k, ev); ok && s {
			hi = k
			break
		}
	}
	if hi < 0 {
		// The largest size first: if it shows nothing, nothing smaller is
		// probed for this event. If it tests nothing (a restart delayed
		// past every section), the largest size that tests stands for it,
		// sought by halving.
		bad := -1 // the smallest size known to test nothing
		for {
			ok, err := r.ensure(ctx, top, r.s.N)
			if err != nil || r.out {
				return err
			}
			if ok {
				break
			}
			if bad, top = top, r.pick(-1, top); top < 0 {
				return nil
			}
		}
		// Halving may have gone far below the largest size that tests:
		// back up towards it while nothing shows.
		for bad > top+1 {
			if s, _ := r.seen(top, ev); s {
				break
			}
			mid := r.pick(top, bad)
			if mid < 0 {
				break
			}
			ok, err := r.ensure(ctx, mid, r.s.N)
			if err != nil || r.out {
				return err
			}
			if ok {
				top = mid
			} else {
				bad = mid
			}
		}
		if s, _ := r.seen(top, ev); !s {
			if !topUp {
				return nil
			}
			_, err := r.ensure(ctx, top, r.s.SafeN)
			if s, _ := r.seen(top, ev); !s || err != nil {
				return err
			}
		}
		hi = top
	}
	for {
		lo := r.cleanBelow(hi, ev)
		if lo < 0 {
			if hi == 0 {
				return nil // the smallest size shows it
			}
			ok, err := r.ensure(ctx, 0, r.s.N)
			if err != nil || r.out {
				return err
			}
			if s, _ := r.seen(0, ev); ok && s {
				hi = 0
				continue
			}
			if ok {
				lo = 0
			}
			// The smallest size tested nothing (a fault too short to land
			// in its cases): the clean end is sought among the sizes
			// between it and hi, from the middle.
			for lo < 0 {
				mid := r.pick(0, hi)
				if mid < 0 {
					return nil
				}
				if _, err := r.ensure(ctx, mid, r.s.N); err != nil || r.out {
					return err
				}
				if s, ok := r.seen(mid, ev); ok && s {
					hi = mid
				} else if ok {
					lo = mid
				}
			}
		}
		for hi-lo > 1 {
			mid := r.pick(lo, hi)
			if mid < 0 {
				break
			}
			if _, err := r.ensure(ctx, mid, r.s.N); err != nil || r.out {
				return err
			}
			if s, ok := r.seen(mid, ev); !ok {
				continue // failed: pick skips it next time
			} else if s {
				hi = mid
			} else {
				lo = mid
			}
		}
		// The safe end's top-up.
		if !topUp {
			return nil
		}
		if _, err := r.ensure(ctx, lo, r.s.SafeN); err != nil || r.out {
			return err
		}
		if s, _ := r.seen(lo, ev); !s {
			return nil
		}
		hi = lo
	}
}

// cleanBelow is the largest probed size below hi that did not show ev,
// or -1.
func (r *run) cleanBelow(hi int, ev string) int {
	for k := hi - 1; k >= 0; k-- {
		if s, ok := r.seen(k, ev); ok && !s {
			return k
		}
	}
	return -1
}

// pick is a size between lo and hi, the middle one if it can be probed,
// else the nearest that can; -1 when none can.
func (r *run) pick(lo, hi int) int {
	mid := (lo + hi) / 2
	for d := 0; d < hi-lo; d++ {
		for _, k := range []int{mid - d, mid + d} {
			if k > lo && k < hi && !r.failed[k] {
				return k
			}
		}
	}
	return -1
}

// Boundary draws ev's boundary from points (ascending size): the smallest
// size that showed it, the largest clean size below that one with its
// exact bound; resolved when the two are neighbours of a grid of ratio
// res and the clean end has safeN tested injections, or when the grid's
// smallest size, min, showed it.
func Boundary(points []results.EnvelopePoint, ev string, min, res float64, safeN int) results.Boundary {
	pts := slices.Clone(points)
	slices.SortFunc(pts, func(a, b results.EnvelopePoint) int { return cmpFloat(a.Size, b.Size) })
	b := results.Boundary{Event: ev}
	first := -1
	for i, p := range pts {
		if p.Tested > 0 && p.Count(ev) > 0 {
			first = i
			break
		}
	}
	safe := -1
	end := len(pts)
	if first >= 0 {
		end = first
		b.First, b.FirstCount, b.FirstTested = pts[first].Size, pts[first].Count(ev), pts[first].Tested
	}
	for i := end - 1; i >= 0; i-- {
		if pts[i].Tested > 0 {
			safe = i
			break
		}
	}
	if safe >= 0 {
		b.Safe, b.SafeTested = pts[safe].Size, pts[safe].Tested
		b.SafeUpper95 = stats.Upper95(0, pts[safe].Tested)
	}
	b.None = first < 0 && safe >= 0
	switch {
	case first >= 0 && safe >= 0:
		b.Resolved = b.First/b.Safe <= res*(1+1e-3) && b.SafeTested >= safeN
	case first >= 0:
		b.Resolved = b.First <= min*(1+1e-6) // below the smallest size of the grid
	}
	return b
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
