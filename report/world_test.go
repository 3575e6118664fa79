package report_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// world builds small results files case by case, with every number
// chosen by the test, for the recommendation rules: no randomness, so a
// test says exactly what the evidence was.
type world struct {
	t *testing.T
	f *results.File
}

func newWorld(t *testing.T) *world {
	t.Helper()
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	return &world{t: t, f: &results.File{
		Version: results.Version, Started: start, Finished: start.Add(10 * time.Minute), RunID: "w-1", Seed: 7, Suite: "test",
	}}
}

// nodes of the backends the worlds use, as their Info reports.
var worldNodes = map[string]int{"etcd": 3, "zookeeper": 3, "redis": 1, "sentinel": 3, "redlock": 5, "redsync": 5, "noop": 0}

func (w *world) base(backend, fault, guard string, clients, trial int) results.Case {
	n, ok := worldNodes[strings.SplitN(backend, "?", 2)[0]]
	if !ok {
		w.t.Fatalf("world: unknown backend %q", backend)
	}
	cls, _, _ := strings.Cut(fault, "?")
	return results.Case{
		Backend: backend, Workload: "hot", Fault: fault, FaultClass: cls, Guard: guard, Fencing: (guard == "fence" || guard == "fence-rw") && backend != "noop" && backend != "redsync",
		Clients: clients, Trial: trial, Keys: 1, TTLMillis: 1000, DurationS: 10, Nodes: n, Quorum: n/2 + 1,
		Durability: results.DurabilityFast, ClientsAs: results.ClientsGoroutines, Errors: map[string]int64{},
		Linearizable: results.Linearizable, LinearizableFenced: results.Linearizable, FreshServers: true, Control: backend == "noop",
	}
}

// perf adds a backend's fault-free cases at 16 clients, one trial per
// throughput given, and a 1-client case per trial for its own cost.
func (w *world) perf(backend string, throughputs ...float64) *world {
	for i, tp := range throughputs {
		c := w.base(backend, "none", "none", 16, i+1)
		c.Throughput, c.Acquired = tp, int64(tp*c.DurationS)
		c.ContendedGrants = c.Acquired // 16 clients on one key: someone always waits
		c.LatencyUS = results.Percentiles{P50: int64(16e6 / tp), P90: int64(20e6 / tp), P99: int64(30e6 / tp), P999: int64(40e6 / tp), Max: int64(50e6 / tp)}
		if backend == "noop" {
			c.Overlaps, c.Incidents = c.Acquired/2, c.Acquired/4
			c.Linearizable = results.NotLinearizable
		}
		w.f.Cases = append(w.f.Cases, c)
		one := w.base(backend, "none", "none", 1, i+1)
		one.Throughput, one.Acquired = tp/8, int64(tp/8*one.DurationS)
		one.LatencyUS = results.Percentiles{P50: int64(1e6 / tp), P99: int64(3e6 / tp), Max: int64(5e6 / tp)}
		one.ReleaseUS = results.Percentiles{P50: int64(0.5e6 / tp), P99: int64(1e6 / tp), Max: int64(2e6 / tp)}
		w.f.Cases = append(w.f.Cases, one)
	}
	return w
}

// outcome is what a fault case measured.
type outcome struct {
	injections                   int
	lockBugs, expired            int64
	staleAccepted, staleRejected int64
	tokenRegressions             int64
	// share is the in-fault grant rate over the baseline; recovery the
	// seconds to recover after each window (-1: never). Zero share and
	// nil recovery leave availability out.
	share    float64
	recovery []float64
	// windows are the in-fault shares of each fault window, when the
	// case recorded them one by one (each a sample of the ranking).
	windows    []float64
	durability string
	invalid    string
	// untested is how many of the injections tested nothing, and why.
	untested int
	whyNot   string
	// ambiguous incidents fell inside the clock bounds of the contract
	// line; clustered charges every incident and stale write to the
	// first injection instead of one per injection in turn.
	ambiguous int64
	clustered bool
}

// fault adds trials of a fault case under each guard given.
func (w *world) fault(backend, fault string, trials int, o outcome, guards ...string) *world {
	for _, guard := range guards {
		for trial := 1; trial <= trials; trial++ {
			c := w.base(backend, fault, guard, 8, trial)
			c.ClientsAs = results.ClientsProcesses
			c.Throughput, c.Acquired = 500, 5000
			c.Injections = o.injections
			tested := o.injections - o.untested
			c.InjectionsTested = &tested
			for i := 1; i <= o.injections; i++ {
				ok := i <= tested
				tg := results.Target{Injection: i, Nodes: []string{backend + "-1"}, Leader: i%2 == 0, Tested: &ok, AtS: float64(i)}
				if !ok {
					tg.WhyNot = o.whyNot
				}
				c.Targets = append(c.Targets, tg)
				c.FaultWindows = append(c.FaultWindows, results.Window{Label: fault, StartS: float64(i), EndS: float64(i) + 0.5})
			}
			// Each incident and stale write is charged to the next
			// injection in turn.
			charge := func(n int64, add func(t *results.Target)) {
				for k := range n {
					i := int(k) % len(c.Targets)
					if o.clustered {
						i = 0
					}
					add(&c.Targets[i])
				}
			}
			c.IncidentsLockBug, c.IncidentsExpiredHolder, c.IncidentsAmbiguous = o.lockBugs, o.expired, o.ambiguous
			c.Incidents = o.lockBugs + o.expired + o.ambiguous
			c.OverlapsAmbiguous = o.ambiguous
			if len(c.Targets) > 0 {
				charge(o.lockBugs, func(t *results.Target) { t.Incidents++; t.IncidentsLockBug++ })
				charge(o.expired, func(t *results.Target) { t.Incidents++ })
				charge(o.ambiguous, func(t *results.Target) { t.Incidents++; t.IncidentsAmbiguous++ })
			}
			c.OverlapsLockBug, c.OverlapsExpiredHolder = 2*o.lockBugs, 2*o.expired
			c.Overlaps = c.OverlapsLockBug + c.OverlapsExpiredHolder + o.ambiguous
			if c.Incidents > 0 {
				c.Linearizable = results.NotLinearizable
			}
			if (guard == "fence" || guard == "fence-rw") && c.Fencing {
				c.StaleRejected = o.staleRejected
				c.StaleAccepted = o.staleAccepted
				c.TokenRegressions = o.tokenRegressions
				if o.tokenRegressions > 0 {
					c.LinearizableFenced = results.NotLinearizable
				}
			} else {
				c.StaleAccepted = o.staleAccepted + o.staleRejected
			}
			if len(c.Targets) > 0 {
				charge(c.StaleAccepted, func(t *results.Target) { t.StaleAccepted++ })
			}
			if o.share > 0 || o.recovery != nil {
				c.Availability = &results.Availability{BaselineThroughput: 500, InFaultThroughput: 500 * o.share, InFaultP99US: 40000, RecoveryS: o.recovery}
				for _, s := range o.windows {
					c.Availability.WindowThroughput = append(c.Availability.WindowThroughput, 500*s)
				}
			}
			if o.durability != "" {
				c.Durability = o.durability
			}
			if o.invalid != "" {
				c.Invalid, c.InvalidReason = true, o.invalid
			}
			w.f.Cases = append(w.f.Cases, c)
		}
	}
	return w
}

// skip records that the run did not put a backend through a class.
func (w *world) skip(backend, class, reason string) *world {
	w.f.Skipped = append(w.f.Skipped, results.Skip{Backend: backend, FaultClass: class, Reason: reason})
	return w
}

func (w *world) without(drop func(c *results.Case) bool) *results.File {
	g := *w.f
	g.Cases = slices.DeleteFunc(slices.Clone(w.f.Cases), func(c results.Case) bool { return drop(&c) })
	return &g
}

// A clean fault outcome: holders that outlive their lease under a long
// pause (what fencing is for), rejected with fencing.
var (
	pauseClean  = outcome{injections: 10, expired: 3, staleRejected: 3, share: 0.7, recovery: []float64{0.2, 0.3}}
	serverClean = outcome{injections: 10, share: 0.6, recovery: []float64{0.5, 0.6}}
)

// twoLocks is a world where etcd and redlock both qualify for both
// questions on client-pause and crash-minority, and etcd alone also
// faced harder faults.
func twoLocks(t *testing.T) *world {
	w := newWorld(t)
	w.perf("etcd", 900, 1000, 1100).perf("redlock", 950, 1050, 1150).perf("noop", 40000, 41000, 42000)
	for _, b := range []string{"etcd", "redlock"} {
		w.fault(b, "client-pause?x=3", 2, pauseClean, "none", "fence")
		w.fault(b, "crash-minority", 2, serverClean, "fence")
	}
	w.fault("noop", "client-pause?x=3", 2, outcome{injections: 10, expired: 9, staleAccepted: 9, share: 1, recovery: []float64{0}}, "none", "fence")
	return w
}

func verdict(t *testing.T, ch report.Choice, backend string) report.Verdict {
	t.Helper()
	for _, v := range ch.Verdicts {
		if v.Backend == backend {
			return v
		}
	}
	t.Fatalf("no verdict for %s", backend)
	return report.Verdict{}
}

// render writes f's report without charts and returns its report.md.
func render(t *testing.T, f *results.File) string {
	t.Helper()
	dir := t.TempDir()
	if err := (report.Options{NoCharts: true}).Write(dir, f); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
