package bench_test

import (
	"slices"
	"testing"
	"time"

	_ "github.com/lockbench/lockbench/backends/all"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/workloads"
)

// loadTime is how long a suite's cases load the backends, before setup
// and reporting: the part of make bench's wall time the suite decides.
func loadTime(cases []bench.Case) time.Duration {
	var d time.Duration
	for _, c := range cases {
		d += c.Spec.Duration
	}
	return d
}

func TestSuitesFitTheirBudget(t *testing.T) {
	for _, tt := range []struct {
		name   string
		suite  bench.Suite
		budget time.Duration // make bench: 15 min; make bench-quick: 3 min, minus setup
	}{
		{"default", bench.Default(), 11 * time.Minute},
		{"quick", bench.Quick(), 2 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cases, err := tt.suite.Cases()
			if err != nil {
				t.Fatal(err)
			}
			if d := loadTime(cases); d > tt.budget {
				t.Fatalf("%d cases load for %v, over the %v budget", len(cases), d, tt.budget)
			}
			t.Logf("%d cases, %v of load", len(cases), loadTime(cases))
		})
	}
}

func TestDefaultSuiteCoversTheCatalogue(t *testing.T) {
	cases, err := bench.Default().Cases()
	if err != nil {
		t.Fatal(err)
	}
	type pair struct{ backend, fault string }
	seen := map[pair]map[workloads.Guard]bool{}
	clients := map[int]bool{}
	for _, c := range cases {
		p := pair{c.Backend.Spec, c.Fault.Name}
		if seen[p] == nil {
			seen[p] = map[workloads.Guard]bool{}
		}
		seen[p][c.Guard] = true
		if c.Fault.Name == "none" {
			clients[c.Spec.Clients] = true
		}
	}
	for _, n := range []int{1, 4, 16, 64} {
		if !clients[n] {
			t.Errorf("the performance sweep lacks %d clients", n)
		}
	}
	// The measurements the report's conclusions rest on.
	for _, want := range []struct {
		pair
		guards []workloads.Guard
	}{
		{pair{"noop", "none"}, []workloads.Guard{workloads.GuardNone}},
		{pair{"redis", "client-pause"}, []workloads.Guard{workloads.GuardNone, workloads.GuardFence}},
		{pair{"sentinel", "failover"}, []workloads.Guard{workloads.GuardNone, workloads.GuardFence}},
		{pair{"redlock", "restart"}, []workloads.Guard{workloads.GuardNone, workloads.GuardFence}},
		{pair{"redlock?quarantine=false", "restart"}, []workloads.Guard{workloads.GuardNone}},
		{pair{"redlock", "crash-minority"}, []workloads.Guard{workloads.GuardFence}},
		{pair{"etcd", "leader-kill"}, []workloads.Guard{workloads.GuardFence}},
		{pair{"zookeeper", "crash-minority"}, []workloads.Guard{workloads.GuardFence}},
	} {
		for _, g := range want.guards {
			if !seen[want.pair][g] {
				t.Errorf("default suite lacks %s under %s with guard %s", want.backend, want.fault, g)
			}
		}
	}
}

// TestNewBackendsInTheSuites: postgres in both modes and rueidislock run
// in both suites, postgres only under the faults that leave its server
// alone (the catalogue has no PostgreSQL targets yet).
func TestNewBackendsInTheSuites(t *testing.T) {
	for name, suite := range map[string]bench.Suite{"default": bench.Default(), "quick": bench.Quick()} {
		cases, err := suite.Cases()
		if err != nil {
			t.Fatal(err)
		}
		faults := map[string]map[string]bool{}
		for _, c := range cases {
			if faults[c.Backend.Spec] == nil {
				faults[c.Backend.Spec] = map[string]bool{}
			}
			faults[c.Backend.Spec][c.Fault.Name] = true
		}
		for _, spec := range []string{"postgres?mode=advisory", "postgres?mode=lease", "rueidislock"} {
			if !faults[spec]["none"] {
				t.Errorf("%s suite: %s has no case without faults", name, spec)
			}
		}
		for _, spec := range []string{"postgres?mode=advisory", "postgres?mode=lease"} {
			for f := range faults[spec] {
				if f != "none" && f != "client-pause" {
					t.Errorf("%s suite: %s under %s, which cannot reach its server", name, spec, f)
				}
			}
		}
	}
	if got := bench.Listed([]string{"etcd", "postgres"}); !slices.Equal(got, []string{"etcd", "postgres", "postgres?mode=advisory"}) {
		t.Errorf("Listed = %v", got)
	}
}
