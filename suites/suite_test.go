package suites_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/suites"
)

// casesOf returns the cases of suite s.
func casesOf(s suites.Suite) ([]bench.Case, error) {
	p, err := s.Plan()
	return p.Cases, err
}

// skipsOf returns the fault classes suite s leaves out on a backend, and
// why; nil when its plan fails (the tests of its cases say why).
func skipsOf(s suites.Suite) []results.Skip {
	p, _ := s.Plan()
	return p.Skipped
}

// loadTime is how long a suite's cases load the backends, before setup
// and reporting: the part of make bench's wall time the suite decides.
func loadTime(cases []bench.Case) time.Duration {
	var d time.Duration
	for _, c := range cases {
		d += max(c.Spec.Duration, c.Fault.MinDuration(bench.Shape(c.Backend), bench.Lease(c.Backend, max(c.Spec.TTL, c.Fault.MinTTL)), c.Injections))
	}
	return d
}

func TestSuitesFitTheirBudget(t *testing.T) {
	for _, tt := range []struct {
		name   string
		suite  suites.Suite
		budget time.Duration // make bench: 20 min; make bench-quick: 3 min, minus setup
	}{
		{"default", suites.Default(), 12*time.Minute + 30*time.Second},
		{"quick", suites.Quick(), 2*time.Minute + 10*time.Second},
		{"full", suites.Full(), 50 * time.Minute}, // no budget of make bench's; logged for the README
	} {
		t.Run(tt.name, func(t *testing.T) {
			cases, err := casesOf(tt.suite)
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
	cases, err := casesOf(suites.Default())
	if err != nil {
		t.Fatal(err)
	}
	type pair struct{ backend, fault string }
	seen := map[pair]map[judge.Guard]bool{}
	clients := map[int]bool{}
	for _, c := range cases {
		p := pair{c.Backend.Spec, c.Fault.Name}
		if seen[p] == nil {
			seen[p] = map[judge.Guard]bool{}
		}
		for _, g := range c.Guards {
			seen[p][g] = true
		}
		if c.Fault.Name == "none" {
			clients[c.Spec.Clients] = true
		}
		if c.Fault.Processes && c.ClientsAs != results.ClientsProcesses {
			t.Errorf("%s: a fault that stops processes with clients as %s", c, c.ClientsAs)
		}
	}
	for _, n := range []int{1, 16, 64} { // 64 on many keys
		if !clients[n] {
			t.Errorf("the performance sweep lacks %d clients", n)
		}
	}
	// The measurements the report's conclusions rest on.
	none, fence, cas := judge.GuardNone, judge.GuardFence, judge.GuardCAS
	for _, want := range []struct {
		pair
		guards []judge.Guard
	}{
		{pair{"noop", "none"}, []judge.Guard{none}},
		{pair{"redis", "client-pause"}, []judge.Guard{none, fence, cas}},
		{pair{"zookeeper", "client-pause"}, []judge.Guard{none, fence, cas}},
		{pair{"etcd", "server-pause"}, []judge.Guard{none, fence}},
		{pair{"sentinel", "failover"}, []judge.Guard{none, fence}},
		{pair{"redlock", "restart"}, []judge.Guard{none, fence}},
		{pair{"redlock", "crash-minority"}, []judge.Guard{fence}},
		{pair{"etcd", "leader-kill"}, []judge.Guard{fence}},
		{pair{"zookeeper", "crash-minority"}, []judge.Guard{fence}},
	} {
		for _, g := range want.guards {
			if !seen[want.pair][g] {
				t.Errorf("default suite lacks %s under %s with guard %s", want.backend, want.fault, g)
			}
		}
	}
}

// TestSkippedSaysWhy: a fault class the default suite does not put a
// backend through is listed with the reason, never silently absent.
func TestSkippedSaysWhy(t *testing.T) {
	skipped := map[[2]string]string{}
	for _, s := range skipsOf(suites.Default()) {
		skipped[[2]string{s.Backend, s.FaultClass}] = s.Reason
	}
	for _, want := range []struct{ backend, class, says string }{
		{"etcd", "clock-jump", "monotonic"},
		{"zookeeper", "power-loss", "redlock"},
		{"redis", "crash-minority", "at least 3 nodes"},
		{"noop", "server-pause", "servers"},
		{"redis", "latency", "make bench-full runs it"},
		{"zookeeper", "latency", "make bench-full runs it"},
	} {
		if r := skipped[[2]string{want.backend, want.class}]; !strings.Contains(r, want.says) {
			t.Errorf("%s under %s: skipped for %q, want a reason that says %q", want.backend, want.class, r, want.says)
		}
	}
	cases, err := casesOf(suites.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if _, ok := skipped[[2]string{c.Backend.Spec, c.Fault.Class()}]; ok {
			t.Errorf("%s is both run and listed as skipped", c)
		}
	}
}

// TestNewBackendsInTheSuites: postgres in both modes and rueidislock run
// in both suites; in the default one, postgres under the faults its one
// server can have, and never under those of a cluster or of Redis keys.
func TestNewBackendsInTheSuites(t *testing.T) {
	for name, suite := range map[string]suites.Suite{"default": suites.Default(), "quick": suites.Quick()} {
		cases, err := casesOf(suite)
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
				if slices.Contains([]string{"crash-minority", "failover", "leader-kill", "partition-leader", "partition-halves"}, f) {
					t.Errorf("%s suite: %s under %s, which a single PostgreSQL server cannot have", name, spec, f)
				}
			}
			if name == "default" {
				for _, f := range []string{"client-pause", "server-pause", "restart", "partition", "clock-jump"} {
					if !faults[spec][f] {
						t.Errorf("default suite: %s never under %s", spec, f)
					}
				}
			}
		}
	}
	listed := bench.Listed()
	for _, want := range []string{"etcd", "postgres", "postgres?mode=advisory"} {
		if !slices.Contains(listed, want) {
			t.Errorf("Listed = %v, without %s", listed, want)
		}
	}
	if slices.Contains(listed, "postgres?mode=lease") {
		t.Errorf("Listed = %v: the lease mode is the plain backend's", listed)
	}
}

// TestProfilesWhereTheyMatter: the default suite powers off a majority of
// single Redis's and Redlock's nodes under periodic and durable (what the
// Redlock spec's fsync claims are about), the full suite every backend
// under every profile its servers have, and says why etcd's clock cannot
// be made to run fast.
func TestProfilesWhereTheyMatter(t *testing.T) {
	type run struct{ backend, fault, durability string }
	ran := func(s suites.Suite) map[run]bool {
		cases, err := casesOf(s)
		if err != nil {
			t.Fatal(err)
		}
		out := map[run]bool{}
		for _, c := range cases {
			out[run{c.Backend.Spec, c.Fault.Class(), c.Durability}] = true
		}
		return out
	}
	def, full := ran(suites.Default()), ran(suites.Full())
	p, d, f := results.DurabilityPeriodic, results.DurabilityDurable, results.DurabilityFast
	for _, b := range []string{"redis", "redlock", "redlock?quarantine=false", "redsync", "rueidislock"} {
		if (b == "redis" || b == "redlock") && !def[run{b, "power-loss", p}] {
			t.Errorf("the default suite lacks %s under power-loss, %s", b, p)
		}
		if def[run{b, "power-loss", d}] || b == "redlock?quarantine=false" && def[run{b, "power-loss", p}] {
			t.Errorf("the default suite runs %s under power-loss beyond periodic on redis and redlock: the full suite's", b)
		}
		for _, prof := range []string{f, p, d} {
			if !full[run{b, "power-loss", prof}] {
				t.Errorf("the full suite lacks %s under power-loss, %s", b, prof)
			}
		}
	}
	for _, b := range []string{"zookeeper", "etcd", "postgres?mode=lease"} {
		if def[run{b, "power-loss", d}] {
			t.Errorf("the default suite runs %s under power-loss: it has Redis-based locks only", b)
		}
		for _, cls := range []string{"restart", "crash", "power-loss"} {
			for _, prof := range []string{f, d} {
				if !full[run{b, cls, prof}] {
					t.Errorf("the full suite lacks %s under %s, %s", b, cls, prof)
				}
			}
		}
	}
	for r := range full {
		if r.durability == p && (r.backend == "zookeeper" || r.backend == "etcd") {
			t.Errorf("%s under %s with a periodic profile, which it does not have", r.backend, r.fault)
		}
	}
	for _, b := range []string{"redis", "zookeeper", "postgres?mode=lease"} {
		if !full[run{b, "clock-rate", f}] {
			t.Errorf("the full suite lacks %s under clock-rate", b)
		}
	}
	var why string
	for _, s := range skipsOf(suites.Full()) {
		if s.Backend == "etcd" && s.FaultClass == "clock-rate" {
			why = s.Reason
		}
	}
	if !strings.Contains(why, "vDSO") {
		t.Errorf("etcd under clock-rate: skipped for %q, want the vDSO named", why)
	}
}

// TestSentinelFaultsLeftToFull: the Sentinel set's Redis nodes face power
// loss (every profile), clock jumps, a fast clock and partitions in the
// full suite; the default suite leaves them there (its time budget), and
// says so as a reason that is not "not applicable", so that its report
// calls them not judged.
func TestSentinelFaultsLeftToFull(t *testing.T) {
	classes := []string{"power-loss", "clock-jump", "clock-rate", "partition"}
	def, err := casesOf(suites.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range def {
		if c.Backend.Name == "sentinel" && slices.Contains(classes, c.Fault.Class()) {
			t.Errorf("the default suite runs %s", c)
		}
	}
	skipped := map[string]string{}
	for _, s := range skipsOf(suites.Default()) {
		if s.Backend == "sentinel" {
			skipped[s.FaultClass] = s.Reason
		}
	}
	for _, cls := range []string{"power-loss", "clock-jump", "partition"} { // the default suite's own classes
		if r := skipped[cls]; !strings.Contains(r, "full suite") || strings.Contains(r, "not measured") {
			t.Errorf("default suite: sentinel under %s skipped for %q, want it left to the full suite", cls, r)
		}
	}
	full, err := casesOf(suites.Full())
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, c := range full {
		if c.Backend.Spec == "sentinel" {
			ran[c.Fault.Class()+"/"+c.Durability] = true
		}
	}
	for _, want := range []string{"power-loss/fast", "power-loss/periodic", "power-loss/durable", "clock-jump/fast", "clock-rate/fast", "partition/fast"} {
		if !ran[want] {
			t.Errorf("the full suite lacks sentinel under %s", want)
		}
	}
	for _, s := range skipsOf(suites.Full()) {
		if s.Backend == "sentinel" && slices.Contains(classes, s.FaultClass) {
			t.Errorf("the full suite skips sentinel under %s: %s", s.FaultClass, s.Reason)
		}
	}
}
