package envelope

import (
	"context"

	"github.com/lockbench/lockbench/results"
)

// untestable reports whether size k tested nothing in two probes.
func (r *run) untestable(k int) bool {
	return r.empty[k] >= 2 && (r.pts[k] == nil || r.pts[k].Tested == 0)
}

// edge narrows the gap between the largest size that tested and the
// smallest above it that tested nothing (or the grid's end, not reached
// yet from below), to neighbouring sizes of the grid: the events'
// bisections leave it wide when an event already shows below (a failover
// shorter than the lease breaks Sentinel at every size that tests), and
// that gap is where the fault stops being a test.
func (r *run) edge(ctx context.Context) error {
	for !r.out {
		top, bad := r.edgeBracket()
		if bad < 0 || top < 0 {
			return nil
		}
		mid := r.pick(top, bad)
		if mid < 0 {
			return nil
		}
		// ensure returns with mid tested, given up (pick skips it), or the
		// budget spent (the loop ends).
		if _, err := r.ensure(ctx, mid, r.s.N); err != nil {
			return err
		}
	}
	return nil
}

// edgeBracket is the largest size that tested and the smallest above it
// that tested nothing (untestable), or len(sizes) when none above it was
// found so (a search from below that has not yet reached the top); -1s
// when no size tested.
func (r *run) edgeBracket() (top, bad int) {
	top = -1
	for k := len(r.sizes) - 1; k >= 0 && top < 0; k-- {
		if pt := r.pts[k]; pt != nil && pt.Tested > 0 {
			top = k
		}
	}
	if top < 0 {
		return -1, -1
	}
	for k := top + 1; k < len(r.sizes); k++ {
		if r.untestable(k) {
			return top, k
		}
	}
	return top, len(r.sizes)
}

// tested is the edge the search found, nil when no size it probed tested
// nothing above the largest that tested.
func (r *run) tested() *results.TestedEdge {
	top, bad := r.edgeBracket()
	if bad < 0 || bad == len(r.sizes) {
		return nil
	}
	return &results.TestedEdge{Last: r.sizes[top], LastTested: r.pts[top].Tested, Untested: r.sizes[bad]}
}
