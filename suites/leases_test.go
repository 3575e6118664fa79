package suites_test

import (
	"testing"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/suites"
)

// TestLeaseMatrix: the default suite runs auto-extending leases paused
// inside an extension on every backend it runs without faults; the full
// suite adds holders that hold up to all their validity, and a pause at
// every point of the client's cycle. Every case of the matrix runs its
// clients as processes, and says its load.
func TestLeaseMatrix(t *testing.T) {
	for _, tc := range []struct {
		suite suites.Suite
		loads []string
		pause []history.Point
	}{
		{suites.Default(), []string{results.LoadAutoExtend}, []history.Point{history.PointAfterRead, history.PointExtend}},
		{suites.Full(), []string{results.LoadValidity, results.LoadAutoExtend}, history.Points},
	} {
		t.Run(tc.suite.Name, func(t *testing.T) {
			cases, err := casesOf(tc.suite)
			if err != nil {
				t.Fatal(err)
			}
			plain := map[string]bool{} // backends run without faults
			loads := map[string]map[string]bool{}
			points := map[history.Point]bool{}
			for _, c := range cases {
				if c.Fault.Name == "none" && c.Spec.Load() == "" {
					plain[c.Backend.Spec] = true
				}
				if l := c.Spec.Load(); l != "" {
					if c.ClientsAs != results.ClientsProcesses {
						t.Errorf("%s: a lease load with clients as %s", c, c.ClientsAs)
					}
					if loads[l] == nil {
						loads[l] = map[string]bool{}
					}
					loads[l][c.Backend.Spec] = true
				}
				if c.Fault.Name == "client-pause" {
					at := history.Point(c.Fault.Params.Get("at"))
					if at == "" {
						at = history.PointAfterRead
					}
					points[at] = true
				}
			}
			for _, l := range tc.loads {
				for b := range plain {
					if !loads[l][b] {
						t.Errorf("%s never runs under the %s load", b, l)
					}
				}
			}
			for _, p := range tc.pause {
				if !points[p] {
					t.Errorf("no client pause at %s", p)
				}
			}
			t.Logf("%d cases, %v of load", len(cases), loadTime(cases))
		})
	}
}
