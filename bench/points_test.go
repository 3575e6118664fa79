package bench_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// TestClientPausePoints stops worker processes for real at each point of
// their cycle. Where the judge makes the pause (before the read, after
// the write) it lands there, every time, and so does a worker armed to
// stop itself between Acquire's return and its grant's report (granted),
// whose late report is no lock bug; inside Acquire or inside an
// extension the nemesis aims by the judge's live view, and every pause
// says where it landed. A holder paused past its lease before its read
// writes after its successors: a stale write (whether the cas guard lets
// it in depends on whether another section marked the key between its
// late read and its write: measured, not asserted).
func TestClientPausePoints(t *testing.T) {
	composetest.StartsServersWithin(t, 5*time.Minute) // five matrices of two 8 s cases with worker processes
	hold, _ := workloads.Constant(time.Millisecond)
	long, _ := workloads.Constant(2 * time.Second)
	for _, tc := range []struct {
		fault string
		spec  workloads.Spec
		// exact: the judge makes the pause, which lands at its point.
		exact bool
	}{
		{"client-pause?at=before-read&x=2", workloads.Spec{Hold: hold}, true},
		{"client-pause?at=after-write&x=2", workloads.Spec{Hold: hold}, true},
		{"client-pause?at=acquire&x=2", workloads.Spec{Hold: hold}, false},
		{"client-pause?at=granted&x=2", workloads.Spec{Hold: hold}, true},
		{"client-pause?at=extend&x=2", workloads.Spec{Hold: long, AutoExtend: true, AcquireTimeout: 10 * time.Second}, false},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			spec := tc.spec
			spec.Duration, spec.TTL = 8*time.Second, time.Second
			f, _ := runMatrix(t, suites.Matrix{
				Backends: []string{"redis"}, Workloads: []workloads.Workload{workloads.Hot}, Faults: []string{tc.fault},
				Guards: []judge.Guard{judge.GuardNone, judge.GuardCAS}, Clients: []int{3}, Injections: 2, Spec: spec,
			})
			c, cas := find(f, "redis", tc.fault, "none"), find(f, "redis", tc.fault, "cas")
			if c == nil || cas == nil {
				t.Fatalf("results %+v", f.Cases)
			}
			aimed := history.Point(strings.TrimSuffix(strings.TrimPrefix(tc.fault, "client-pause?at="), "&x=2"))
			landed := 0
			for _, n := range c.PausesLanded {
				landed += n
			}
			if c.Invalid || c.Injections == 0 || landed < c.Injections {
				t.Fatalf("invalid %v (%s): %d injections, pauses landed %v", c.Invalid, c.InvalidReason, c.Injections, c.PausesLanded)
			}
			known := []string{"acquire", "granted", "before-read", "after-read", "after-write", "release", "idle", "unknown"}
			for _, x := range c.Targets {
				at, _, inExtend := strings.Cut(x.Landed, "+")
				if x.Aimed != string(aimed) || !slices.Contains(known, at) || (inExtend && x.Landed != at+"+extend") || x.Tested == nil {
					t.Fatalf("injection %+v: want it aimed at %s, with where it landed and whether it tested that", x, aimed)
				}
				if tc.exact && (x.Landed != string(aimed) || !*x.Tested) {
					t.Fatalf("injection %+v: a pause the judge makes lands where it is aimed", x)
				}
				if !*x.Tested && x.WhyNot == "" {
					t.Fatalf("injection %+v missed its point without saying so", x)
				}
			}
			if tested, _ := c.Tested(); tested == 0 {
				t.Logf("no pause landed %s in this run (the aim is by the live view, the landing by the history)", aimed)
			}
			if aimed == history.PointBeforeRead && c.StaleAccepted < int64(c.Injections) {
				t.Fatalf("guard none, pauses of 2 leases before the first access: %d stale writes accepted in %d injections; want each late write stale",
					c.StaleAccepted, c.Injections)
			}
			t.Logf("guard cas: %d stale writes accepted, %d rejected", cas.StaleAccepted, cas.StaleRejected)
			if aimed == history.PointExtend && c.Extends == 0 {
				t.Fatal("no extension reported under auto-extending leases")
			}
			if c.OverlapsLockBug != 0 {
				t.Fatalf("%d lock-bug overlaps from pausing a client of a single Redis", c.OverlapsLockBug)
			}
		})
	}
}
