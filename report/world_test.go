package report_test

import (
	"fmt"
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
		Backend: backend, Workload: "hot", Fault: fault, FaultClass: cls, Guard: guard, Fencing: guard == "fence" && backend != "noop" && backend != "redsync",
		Clients: clients, Trial: trial, Keys: 1, TTLMillis: 1000, DurationS: 10, Nodes: n, Quorum: n/2 + 1,
		Durability: results.DurabilityFast, ClientsAs: results.ClientsGoroutines, Errors: map[string]int64{},
		Linearizable: results.Linearizable, LinearizableFenced: results.Linearizable, FreshServers: true,
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
	share      float64
	recovery   []float64
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
			if guard == "fence" && c.Fencing {
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

func TestBoundsAreStatedBesideEveryZero(t *testing.T) {
	rec := report.Recommend(twoLocks(t).f)
	if rec.Correctness.Backend == "" {
		t.Fatalf("no correctness choice: %s", rec.Correctness.Answer)
	}
	ev := strings.Join(rec.Correctness.Evidence, "\n")
	// Per class, never pooled: client-pause 10 injections × (2 guards) × 2
	// trials = 40, crash-minority 10 × 2 = 20; with fencing 20 each.
	if !strings.Contains(ev, "Lock-bug incidents, per fault class and profile (tested injections with one): client-pause (fast) 0/40 ≤7.2%; crash-minority (fast) 0/20 ≤14%; without faults 0/30k ≤0.01%.") {
		t.Errorf("the lock-bug zero lacks its bound, per class:\n%s", ev)
	}
	if !strings.Contains(ev, "With fencing, stale writes accepted (tested injections with one): client-pause (fast) 0/20 ≤14%; crash-minority (fast) 0/20 ≤14%") {
		t.Errorf("the stale-write zero lacks its bound, per class:\n%s", ev)
	}
	// The same words as the safety table: its cells read the same.
	md := render(t, twoLocks(t).f)
	for _, cell := range []string{"0/40 ≤7.2%", "0/20 ≤14%"} {
		if !strings.Contains(md, cell) {
			t.Errorf("the safety table does not state %q as the answer does", cell)
		}
	}
	v := verdict(t, rec.Correctness, rec.Correctness.Backend)
	if !strings.Contains(v.Reason, "≤") || !strings.Contains(v.Fencing, "required") {
		t.Errorf("verdict %+v", v)
	}
}

func TestNoopNeverQualifies(t *testing.T) {
	w := twoLocks(t)
	// Even a control that happened to count nothing does not qualify.
	clean := w.without(func(*results.Case) bool { return false })
	for i := range clean.Cases {
		c := &clean.Cases[i]
		if c.Backend == "noop" {
			c.Overlaps, c.Incidents, c.IncidentsExpiredHolder, c.OverlapsExpiredHolder, c.StaleAccepted = 0, 0, 0, 0, 0
		}
	}
	for name, f := range map[string]*results.File{"counting": w.f, "clean": clean} {
		rec := report.Recommend(f)
		for _, ch := range []report.Choice{rec.Efficiency, rec.Correctness} {
			if v := verdict(t, ch, "noop"); v.Qualifies || ch.Backend == "noop" || slices.Contains(ch.Tied, "noop") {
				t.Errorf("%s: the control qualified: %+v", name, v)
			}
			if v := verdict(t, ch, "noop"); !strings.Contains(v.Reason, "control") {
				t.Errorf("%s: noop's reason %q does not say it is the control", name, v.Reason)
			}
		}
	}
}

func TestClassNotRunIsNotJudgedNeverAPass(t *testing.T) {
	w := twoLocks(t)
	w.fault("redlock", "clock-jump?by=0.5&nodes=minority", 2, serverClean, "none", "fence")
	w.skip("etcd", "clock-jump", "etcd leases count down on the leader's monotonic clock")
	rec := report.Recommend(w.f)
	for _, ch := range []report.Choice{rec.Efficiency, rec.Correctness} {
		if slices.Contains(ch.Compared, "clock-jump") {
			t.Errorf("clock-jump, which etcd did not face, was compared on: %v", ch.Compared)
		}
		v := verdict(t, ch, "etcd")
		if !slices.ContainsFunc(v.NotJudged, func(s string) bool {
			return strings.HasPrefix(s, "clock-jump — not judged: etcd leases count down on the leader's monotonic clock")
		}) {
			t.Errorf("etcd's not-judged classes %q lack clock-jump with the run's reason", v.NotJudged)
		}
		if ch.Backend == "etcd" && !strings.Contains(strings.Join(ch.Evidence, "\n"), "Not judged for etcd") {
			t.Errorf("the etcd recommendation does not say what it does not cover:\n%s", strings.Join(ch.Evidence, "\n"))
		}
	}
	// Without the run's record, the report's own table gives the reason.
	w.f.Skipped = nil
	v := verdict(t, report.Recommend(w.f).Correctness, "etcd")
	if !slices.ContainsFunc(v.NotJudged, func(s string) bool {
		return strings.Contains(s, "monotonic") && strings.Contains(s, "the report's table")
	}) {
		t.Errorf("etcd's clock-jump without a recorded reason: %q", v.NotJudged)
	}

	// A backend not put through client-pause with fencing is not judged
	// for correctness, however clean the rest of its record.
	noPause := w.without(func(c *results.Case) bool {
		return c.Backend == "redlock" && c.FaultClass == "client-pause" && c.Guard == "fence"
	})
	if v := verdict(t, report.Recommend(noPause).Correctness, "redlock"); v.Qualifies || !strings.Contains(v.Reason, "not judged") {
		t.Errorf("redlock without fenced client-pause: %+v", v)
	}
}

// TestRedlockDoesNotWinOnOthersHarderFaults: etcd alone faces the faults
// Raft exists for (a paused leader, a leader cut off) and pays for them
// in expired holders and unavailability; none of that may rank it below
// our Redlock, which never faced them.
func TestRedlockDoesNotWinOnOthersHarderFaults(t *testing.T) {
	w := twoLocks(t)
	hard := outcome{injections: 10, expired: 6, staleRejected: 6, share: 0.02, recovery: []float64{4, -1}}
	w.fault("etcd", "server-pause", 2, hard, "none", "fence")
	w.fault("etcd", "partition-leader", 2, hard, "none", "fence")
	w.skip("redlock", "partition-leader", "Redlock's masters elect no leader")
	rec := report.Recommend(w.f)
	only := report.Recommend(w.without(func(c *results.Case) bool {
		return c.Backend == "etcd" && (c.FaultClass == "server-pause" || c.FaultClass == "partition-leader")
	}))
	for _, q := range []struct {
		name      string
		with, wo  report.Choice
		wantFirst string
	}{
		{"efficiency", rec.Efficiency, only.Efficiency, "etcd"},
		{"correctness", rec.Correctness, only.Correctness, "etcd"},
	} {
		if !slices.Equal(q.with.Compared, []string{"client-pause", "crash-minority"}) {
			t.Errorf("%s compared on %v, want the classes both faced", q.name, q.with.Compared)
		}
		if q.with.Backend != q.wo.Backend || !slices.Equal(q.with.Tied, q.wo.Tied) {
			t.Errorf("%s: etcd's extra faults changed the choice from %s (tied %v) to %s (tied %v)", q.name, q.wo.Backend, q.wo.Tied, q.with.Backend, q.with.Tied)
		}
		// Speeds overlap and so do availability and safety: the tie goes
		// to the fewer nodes, etcd's 3 against Redlock's 5.
		if q.with.Backend != q.wantFirst || !slices.Equal(q.with.Tied, []string{"redlock"}) {
			t.Errorf("%s chose %s tied with %v, want etcd on cost, tied with redlock:\n%s", q.name, q.with.Backend, q.with.Tied, q.with.Answer)
		}
		if v := verdict(t, q.with, "etcd"); !v.Qualifies {
			t.Errorf("%s: etcd, clean where it counts, did not qualify: %s", q.name, v.Reason)
		}
	}

	// Our Redlock double-granting under clock-jump, fenced or not, is a
	// lock bug: fencing does not forgive it.
	w.fault("redlock", "clock-jump?by=1&nodes=majority", 2, outcome{injections: 10, lockBugs: 2, staleRejected: 2}, "none", "fence")
	v := verdict(t, report.Recommend(w.f).Correctness, "redlock")
	if v.Qualifies || !strings.Contains(v.Reason, "lock bugs: under clock-jump (fast profile): 8 incidents; 8 in 40 tested injections had one") {
		t.Errorf("redlock with lock bugs under clock-jump: %+v", v)
	}
}

func TestInvalidCaseIsExcludedAndListed(t *testing.T) {
	w := twoLocks(t)
	// A failed injection that "saw" lock bugs: it measured nothing it
	// promised, so it must neither count nor vanish.
	w.fault("etcd", "crash-minority", 1, outcome{injections: 3, lockBugs: 5, invalid: "SIGSTOP of etcd-2 failed: no such process"}, "fence")
	rec := report.Recommend(w.f)
	if v := verdict(t, rec.Correctness, "etcd"); !v.Qualifies {
		t.Errorf("etcd disqualified by an invalid case: %s", v.Reason)
	}
	if len(rec.Invalid) != 1 || !strings.Contains(rec.Invalid[0], "no such process") || !strings.Contains(rec.Invalid[0], "etcd under crash-minority") {
		t.Errorf("invalid cases listed as %q", rec.Invalid)
	}
	dir := t.TempDir()
	if err := (report.Options{NoCharts: true}).Write(dir, w.f); err != nil {
		t.Fatal(err)
	}
	md := string(read(t, dir+"/report.md"))
	for _, want := range []string{"Invalid cases", "SIGSTOP of etcd-2 failed: no such process", "1 invalid case excluded", "1 case was excluded as invalid"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// Every case of a class invalid: the class is not judged, with why.
	allInvalid := w.without(func(c *results.Case) bool {
		return c.Backend == "etcd" && c.FaultClass == "crash-minority" && !c.Invalid
	})
	v := verdict(t, report.Recommend(allInvalid).Correctness, "etcd")
	if !slices.ContainsFunc(v.NotJudged, func(s string) bool {
		return strings.Contains(s, "crash-minority — not judged: every case was invalid")
	}) {
		t.Errorf("etcd's invalid crash-minority: %q", v.NotJudged)
	}
}

func TestSpeedDecidesOnlyWhenRangesSeparate(t *testing.T) {
	for _, c := range []struct {
		name            string
		etcd, redlock   []float64
		backend         string
		tied            bool
		standingRedlock string
	}{
		{"overlapping ranges tie, and cost decides", []float64{900, 1000, 1100}, []float64{1050, 1150, 1250}, "etcd", true, "tied with etcd"},
		{"separate ranges of 3 trials: the faster wins", []float64{900, 1000, 1100}, []float64{1500, 1600, 1700}, "redlock", false, "recommended"},
		{"separate ranges of 2 trials are too few", []float64{900, 1000}, []float64{1500, 1600}, "etcd", true, "tied with etcd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t).perf("etcd", c.etcd...).perf("redlock", c.redlock...)
			for _, b := range []string{"etcd", "redlock"} {
				w.fault(b, "client-pause?x=3", 2, pauseClean, "none", "fence")
				w.fault(b, "crash-minority", 2, serverClean, "fence")
			}
			rec := report.Recommend(w.f)
			ch := rec.Efficiency
			if ch.Backend != c.backend || (len(ch.Tied) > 0) != c.tied {
				t.Fatalf("chose %s tied with %v:\n%s", ch.Backend, ch.Tied, ch.Answer)
			}
			if v := verdict(t, ch, "redlock"); !strings.HasPrefix(v.Standing, c.standingRedlock) {
				t.Errorf("redlock's standing %q", v.Standing)
			}
			if v := verdict(t, ch, "etcd"); !c.tied && !strings.Contains(v.Standing, "set apart on speed") {
				t.Errorf("etcd's standing %q", v.Standing)
			}
			speed := ""
			for _, e := range ch.Evidence {
				if strings.HasPrefix(e, "Speed:") {
					speed = e
				}
			}
			if c.tied && !strings.Contains(speed, "indistinguishable here") {
				t.Errorf("a tie not worded as one: %q", speed)
			}
		})
	}
}

func TestAvailabilityAndSafetyRankBeforeSpeed(t *testing.T) {
	w := newWorld(t).perf("etcd", 900, 1000, 1100).perf("redis", 3000, 3100, 3200)
	for _, b := range []string{"etcd", "redis"} {
		w.fault(b, "client-pause?x=3", 2, pauseClean, "none", "fence")
	}
	w.fault("etcd", "server-pause", 2, outcome{injections: 10, share: 0.6, recovery: []float64{0.5, 0.7}}, "fence")
	w.fault("redis", "server-pause", 2, outcome{injections: 10, share: 0.01, recovery: []float64{6, -1}}, "fence")
	rec := report.Recommend(w.f)
	if rec.Efficiency.Backend != "etcd" {
		t.Fatalf("the faster redis, unavailable while its only node is paused, was chosen: %s", rec.Efficiency.Answer)
	}
	if v := verdict(t, rec.Efficiency, "redis"); !strings.Contains(v.Standing, "set apart on availability: under server-pause") {
		t.Errorf("redis standing %q", v.Standing)
	}

	// For efficiency, double grants are tolerated but rank: redis with
	// clearly more incidents per injection drops before speed.
	w2 := newWorld(t).perf("etcd", 900, 1000, 1100).perf("redis", 3000, 3100, 3200)
	w2.fault("etcd", "client-pause?x=3", 2, outcome{injections: 20, share: 0.7}, "none")
	w2.fault("redis", "client-pause?x=3", 2, outcome{injections: 20, lockBugs: 8, share: 0.7}, "none")
	ch := report.Recommend(w2.f).Efficiency
	if ch.Backend != "etcd" {
		t.Fatalf("efficiency chose %s: %s", ch.Backend, ch.Answer)
	}
	if v := verdict(t, ch, "redis"); !strings.Contains(v.Standing, "set apart on safety: under client-pause (fast profile)") || !strings.Contains(v.Standing, "16 in 40 tested injections") {
		t.Errorf("redis standing %q", v.Standing)
	}
}

func TestLockBugsDisqualifyWhateverTheProfileAndSaySo(t *testing.T) {
	w := twoLocks(t)
	w.perf("redis", 3000, 3100, 3200)
	w.fault("redis", "client-pause?x=3", 2, pauseClean, "none", "fence")
	w.fault("redis", "crash-minority", 2, serverClean, "fence")
	w.fault("redis", "restart", 2, outcome{injections: 4, lockBugs: 1, tokenRegressions: 1}, "fence")
	w.fault("redis", "restart", 2, outcome{injections: 4, durability: results.DurabilityDurable}, "fence")
	v := verdict(t, report.Recommend(w.f).Correctness, "redis")
	if v.Qualifies || !strings.Contains(v.Reason, "under restart (fast profile)") || strings.Contains(v.Reason, "durable profile") {
		t.Errorf("redis losing locks on a fast restart only: %+v", v)
	}

	// Incidents the judge did not classify (a file from before it) count
	// against the lock.
	legacy := w.without(func(*results.Case) bool { return false })
	for i := range legacy.Cases {
		c := &legacy.Cases[i]
		if c.Backend == "etcd" && c.FaultClass == "crash-minority" {
			c.Overlaps, c.Incidents, c.IncidentsLockBug, c.IncidentsExpiredHolder, c.OverlapsLockBug, c.OverlapsExpiredHolder = 3, 0, 0, 0, 0, 0
		}
	}
	if v := verdict(t, report.Recommend(legacy).Correctness, "etcd"); v.Qualifies || !strings.Contains(v.Reason, "not classified") {
		t.Errorf("unclassified overlaps forgiven: %+v", v)
	}
}

// TestReportNeverSaysSafeWithoutABound writes the report of a world and
// checks its words: no "safe", "no violation" or bare "none" where a
// count belongs, and a bound beside every "0 in".
func TestReportNeverSaysSafeWithoutABound(t *testing.T) {
	dir := t.TempDir()
	if err := (report.Options{NoCharts: true}).Write(dir, twoLocks(t).f); err != nil {
		t.Fatal(err)
	}
	md := string(read(t, dir+"/report.md"))
	lower := strings.ToLower(md)
	for _, bad := range []string{" safe ", " safe.", "no violation", "violations: none", "stale writes: none"} {
		if strings.Contains(lower, bad) {
			i := strings.Index(lower, bad)
			t.Errorf("report.md says %q without a bound: …%s…", bad, md[max(i-80, 0):min(i+80, len(md))])
		}
	}
	for rest := md; ; {
		i := strings.Index(rest, "0 in ")
		if i < 0 {
			break
		}
		rest = rest[i+len("0 in "):]
		end := strings.Index(rest, ")")
		if end < 0 || !strings.Contains(rest[:end], "≤") {
			t.Errorf("a count without its bound: …0 in %s…", rest[:min(len(rest), 80)])
		}
	}
}

// TestGuardsOfOneRunCountOnce: the runner judges one run's writes under
// several guards and writes a case per guard, all pointing at the run's
// history. What the lock did in that run — its injections, incidents,
// grants — must count once, or every guard would tighten the bounds;
// what each guard let through counts per guard.
func TestGuardsOfOneRunCountOnce(t *testing.T) {
	w := twoLocks(t)
	for i := range w.f.Cases {
		if c := &w.f.Cases[i]; c.Fault != "none" {
			c.History = fmt.Sprintf("history/%s-%s-%d.jsonl.gz", c.Backend, c.FaultClass, c.Trial)
		}
	}
	rec := report.Recommend(w.f)
	ev := strings.Join(rec.Correctness.Evidence, "\n")
	// client-pause: 10 injections × 2 trials, run once under two guards:
	// 20, not 40; crash-minority: 10 × 2 under fence only.
	if !strings.Contains(ev, "client-pause (fast) 0/20 ≤14%; crash-minority (fast) 0/20 ≤14%") {
		t.Errorf("a run counted once per guard:\n%s", ev)
	}
	caveats := strings.Join(rec.Caveats, "\n")
	if !strings.Contains(caveats, "etcd: expired-holder incidents under client-pause 6 incidents, 6 in 20 tested injections had one (30%; ≤ 51% at 95%) (with fencing 6 stale writes rejected, 0 accepted; without, 6 accepted)") {
		t.Errorf("expired holders of one run counted per guard, or the guards' stale writes merged:\n%s", caveats)
	}
	free := verdict(t, rec.Efficiency, "etcd")
	if !strings.Contains(free.Reason, "under faults (tolerated, counted), double-grant incidents, tested injections with one: client-pause (fast) 6/20 ≤51%; crash-minority (fast) 0/20 ≤14%") {
		t.Errorf("etcd efficiency reason %q", free.Reason)
	}
}

// TestRunLevelFacts: a run invalid under one guard is invalid under all
// of them, and a lone client's grants — which cannot overlap — do not
// tighten the fault-free bound.
func TestRunLevelFacts(t *testing.T) {
	w := twoLocks(t)
	w.fault("etcd", "server-pause", 1, outcome{injections: 5, lockBugs: 2}, "none", "fence")
	n := len(w.f.Cases)
	for i := n - 2; i < n; i++ {
		w.f.Cases[i].History = "history/etcd-server-pause-1.jsonl.gz"
	}
	w.f.Cases[n-1].Invalid, w.f.Cases[n-1].InvalidReason = true, "SIGSTOP of etcd-2 failed"
	rec := report.Recommend(w.f)
	if v := verdict(t, rec.Correctness, "etcd"); !v.Qualifies {
		t.Errorf("the other guard's case of an invalid run counted: %s", v.Reason)
	}
	if len(rec.Invalid) != 2 || !strings.Contains(rec.Invalid[0], "its run was invalid: SIGSTOP of etcd-2 failed") {
		t.Errorf("invalid %q", rec.Invalid)
	}
	// etcd's fault-free grants: 900+1000+1100 per second at 16 clients for
	// 10 s, and an eighth of that at 1 client, which must not count.
	v := verdict(t, rec.Efficiency, "etcd")
	if !strings.Contains(v.Reason, "0 in 30k contended grants (rate ≤ 0.01% at 95%)") {
		t.Errorf("etcd's fault-free bound: %s", v.Reason)
	}
}

// TestSpeedIsComparedOnManyKeys: when backends ran both the hot key and
// many keys, speed is compared on many keys, where the lock's own cost
// shows, not on the hot key, where a 1 ms hold caps every lock.
func TestSpeedIsComparedOnManyKeys(t *testing.T) {
	w := newWorld(t).perf("etcd", 900, 950, 1000).perf("redis", 900, 950, 1000)
	for _, b := range []string{"etcd", "redis"} {
		w.fault(b, "client-pause?x=3", 2, pauseClean, "none", "fence")
		for i, tp := range map[string][]float64{"etcd": {1500, 1600, 1700}, "redis": {9000, 9500, 10000}}[b] {
			c := w.base(b, "none", "none", 64, i+1)
			c.Workload, c.Keys = "uniform", 100
			c.Throughput, c.Acquired = tp, int64(tp*c.DurationS)
			w.f.Cases = append(w.f.Cases, c)
		}
	}
	rec := report.Recommend(w.f)
	if rec.Workload != "uniform" || rec.Efficiency.Backend != "redis" || len(rec.Efficiency.Tied) > 0 {
		t.Fatalf("reference workload %q, efficiency chose %s tied with %v: want uniform, redis alone:\n%s",
			rec.Workload, rec.Efficiency.Backend, rec.Efficiency.Tied, rec.Efficiency.Answer)
	}
}

// TestVariantIsNoCandidate: a variant the suite runs under a few faults
// only cannot be recommended, nor narrow the classes the candidates are
// compared on to those few.
func TestVariantIsNoCandidate(t *testing.T) {
	w := twoLocks(t)
	w.fault("redlock?clockfloor=false", "client-pause?x=3", 2, pauseClean, "none", "fence")
	w.skip("redlock?clockfloor=false", "crash-minority", "the suite runs the variant redlock?clockfloor=false under [client-pause] only")
	ch := report.Recommend(w.f).Correctness
	if v := verdict(t, ch, "redlock?clockfloor=false"); v.Qualifies || !strings.Contains(v.Reason, "variant") {
		t.Fatalf("the variant qualified: %+v", v)
	}
	if !slices.Contains(ch.Compared, "crash-minority") {
		t.Fatalf("compared on %v: the variant narrowed the classes", ch.Compared)
	}
}

// TestEveryFaultWindowIsAnAvailabilitySample: one run of three windows
// gives three samples, enough to set a backend apart.
func TestEveryFaultWindowIsAnAvailabilitySample(t *testing.T) {
	w := newWorld(t).perf("etcd", 900, 1000, 1100).perf("redis", 3000, 3100, 3200)
	for _, b := range []string{"etcd", "redis"} {
		w.fault(b, "client-pause?x=3", 1, pauseClean, "none", "fence")
	}
	w.fault("etcd", "server-pause", 1, outcome{injections: 3, share: 0.6, recovery: []float64{0.5, 0.6, 0.7}}, "fence")
	w.fault("redis", "server-pause", 1, outcome{injections: 3, share: 0.01, recovery: []float64{0.5, 0.6, 0.7}}, "fence")
	for i, c := range w.f.Cases {
		if c.Availability != nil && c.FaultClass == "server-pause" {
			s := c.Availability.InFaultThroughput
			w.f.Cases[i].Availability.WindowThroughput = []float64{s * 0.9, s, s * 1.1}
		}
	}
	if ch := report.Recommend(w.f).Efficiency; ch.Backend != "etcd" {
		t.Fatalf("three windows of one run did not set redis apart on availability: chose %s\n%s", ch.Backend, ch.Answer)
	}
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

// TestOnlyTestedInjectionsCount: an injection that tested nothing enters
// no rate, and is counted apart with why; an injection followed by five
// incidents is one failed trial, not five.
func TestOnlyTestedInjectionsCount(t *testing.T) {
	w := twoLocks(t)
	w.fault("etcd", "server-pause", 1, outcome{injections: 10, untested: 4, whyNot: "no grant in the second before the strike: the lock was not granting",
		lockBugs: 5, clustered: true, share: 0.6, recovery: []float64{0.5, 0.6}}, "fence")
	rec := report.Recommend(w.f)
	v := verdict(t, rec.Correctness, "etcd")
	if v.Qualifies || !strings.Contains(v.Reason, "under server-pause (fast profile): 5 incidents; 1 in 6 tested injections had one") {
		t.Errorf("etcd with 5 lock bugs after one of 6 tested injections: %+v", v)
	}
	md := render(t, w.f)
	for _, want := range []string{"6 (+4 untested)", "4 injections tested nothing and entered no rate: no grant in the second before the strike"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report does not say %q", want)
		}
	}
}

// TestFencedVerdictMustBeTrue: correctness needs porcupine's fenced
// verdict true on every history of the backend; unknown is no pass.
func TestFencedVerdictMustBeTrue(t *testing.T) {
	w := twoLocks(t)
	for i := range w.f.Cases {
		if c := &w.f.Cases[i]; c.Backend == "etcd" && c.FaultClass == "crash-minority" && c.Trial == 1 {
			c.LinearizableFenced, c.LinearizableFencedReason = results.Unknown, "the check did not finish in 10s"
		}
	}
	v := verdict(t, report.Recommend(w.f).Correctness, "etcd")
	if v.Qualifies || !strings.Contains(v.Reason, "unknown is not a pass") || !strings.Contains(v.Reason, "did not finish") {
		t.Errorf("etcd with a fenced verdict unknown: %+v", v)
	}
}

// TestAmbiguousIsAClassOfItsOwn: incidents inside the clock bounds of the
// contract line disqualify nobody, are never counted as expired holders,
// and are shown beside the verdict and in the tables.
func TestAmbiguousIsAClassOfItsOwn(t *testing.T) {
	w := twoLocks(t)
	w.fault("etcd", "partition-leader", 2, outcome{injections: 5, ambiguous: 2, share: 0.5, recovery: []float64{1}}, "fence")
	rec := report.Recommend(w.f)
	v := verdict(t, rec.Correctness, "etcd")
	if !v.Qualifies || !strings.Contains(v.Reason, "ambiguous incidents (inside the clock bounds of the contract line: neither a lock bug nor an expired holder): partition-leader (fast) 4/10 ≤") {
		t.Errorf("etcd with ambiguous incidents: %+v", v)
	}
	if strings.Contains(v.Fencing, "partition-leader") {
		t.Errorf("ambiguous incidents read as expired holders: %s", v.Fencing)
	}
	if md := render(t, w.f); !strings.Contains(md, "ambiguous incidents") || !strings.Contains(strings.Join(rec.Caveats, "\n"), "etcd: ambiguous incidents partition-leader (fast) 4/10") {
		t.Errorf("ambiguous incidents not shown:\n%s", strings.Join(rec.Caveats, "\n"))
	}
}

// TestTheAnswerHoldsStill: two runs that differ only in availability
// noise — one where redis's windows fall clearly below etcd's, one where
// they overlap — may put a different backend first, but both answers
// name the same two backends as tied on safety, and the first says that
// only numbers which move from run to run set them apart.
func TestTheAnswerHoldsStill(t *testing.T) {
	run := func(redisShare float64) report.Choice {
		w := newWorld(t).perf("etcd", 900, 1000, 1100).perf("redis", 950, 1000, 1050)
		for _, b := range []string{"etcd", "redis"} {
			w.fault(b, "client-pause?x=3", 2, pauseClean, "none", "fence")
		}
		w.fault("etcd", "server-pause", 3, outcome{injections: 10, share: 0.6, recovery: []float64{0.5, 0.6}}, "fence")
		w.fault("redis", "server-pause", 3, outcome{injections: 10, share: redisShare, recovery: []float64{0.5, 0.6}}, "fence")
		return report.Recommend(w.f).Correctness
	}
	apart, close := run(0.3), run(0.55)
	if apart.Backend != "etcd" || close.Backend != "redis" {
		t.Fatalf("chose %s and %s: the worlds do not show what the test means", apart.Backend, close.Backend)
	}
	for _, ch := range []report.Choice{apart, close} {
		if !strings.Contains(ch.Answer, "etcd") || !strings.Contains(ch.Answer, "redis") {
			t.Errorf("the answer does not name the tie: %s", ch.Answer)
		}
	}
	if !strings.Contains(apart.Answer, "redis is tied with it on safety and set apart in this run only by availability or speed") ||
		!strings.Contains(strings.Join(apart.Evidence, "\n"), "What would settle the order between etcd and redis") {
		t.Errorf("the answer resting on availability does not say so:\n%s\n%s", apart.Answer, strings.Join(apart.Evidence, "\n"))
	}
}

// TestTrialsOnSharedServersCountAsOne: speed ranges that separate, from
// three trials that ran on the same servers, call nobody faster.
func TestTrialsOnSharedServersCountAsOne(t *testing.T) {
	w := newWorld(t).perf("etcd", 900, 1000, 1100).perf("redlock", 2000, 2100, 2200)
	for _, b := range []string{"etcd", "redlock"} {
		w.fault(b, "client-pause?x=3", 2, pauseClean, "none", "fence")
		w.fault(b, "crash-minority", 2, serverClean, "fence")
	}
	if ch := report.Recommend(w.f).Efficiency; ch.Backend != "redlock" {
		t.Fatalf("independent trials: chose %s, want the faster redlock", ch.Backend)
	}
	for i := range w.f.Cases {
		w.f.Cases[i].FreshServers = false
	}
	rec := report.Recommend(w.f)
	if ch := rec.Efficiency; ch.Backend != "etcd" || !slices.Equal(ch.Tied, []string{"redlock"}) || !strings.Contains(strings.Join(ch.Evidence, "\n"), "on the same servers, which count as one") {
		t.Errorf("shared servers: chose %s tied with %v, want etcd on cost, redlock tied:\n%s\n%s", ch.Backend, ch.Tied, ch.Answer, strings.Join(ch.Evidence, "\n"))
	}
	if !strings.Contains(strings.Join(rec.Caveats, "\n"), "Trials of a combination ran one after another on the same servers") {
		t.Errorf("the caveats do not say the trials shared servers")
	}
}

// TestStaleWritesToldFromSilent: the report separates stale writes made
// after the holder's lease had told it so from silent ones, and bounds
// stale writes accepted by the tested injections that had one.
func TestStaleWritesToldFromSilent(t *testing.T) {
	w := twoLocks(t)
	for i := range w.f.Cases {
		if c := &w.f.Cases[i]; c.Fault != "none" {
			c.History = fmt.Sprintf("history/%s-%s-%d.jsonl.gz", c.Backend, c.FaultClass, c.Trial)
		}
		if c := &w.f.Cases[i]; c.Backend == "etcd" && c.FaultClass == "client-pause" {
			c.StaleTold, c.StaleSilent = c.StaleAccepted+c.StaleRejected, 0
		}
		if c := &w.f.Cases[i]; c.Backend == "redlock" && c.FaultClass == "client-pause" {
			c.StaleTold, c.StaleSilent = 1, c.StaleAccepted+c.StaleRejected-1
		}
	}
	rec := report.Recommend(w.f)
	caveats := strings.Join(rec.Caveats, "\n")
	// Each guard's case of a run records the run's stale writes, told or
	// silent alike: 3 per run, 2 runs, counted once whatever the guards.
	for _, want := range []string{"etcd: stale writes made after its lease had told the holder it ended", "under client-pause 6 told, 0 silent", "under client-pause 2 told, 4 silent"} {
		if !strings.Contains(caveats, want) {
			t.Errorf("caveats lack %q:\n%s", want, caveats)
		}
	}
	// Without fencing etcd accepted 6 stale writes, one after each of 6
	// of its 20 tested client-pause injections.
	if md := render(t, w.f); !strings.Contains(md, "| etcd | client-pause | fast | 4 | 20 | 0/20 ≤14% | 0/20 ≤14% | 6/20 ≤51% | 0/20 ≤14% | 6/20 ≤51% | 6 |") {
		t.Errorf("the per-class row of etcd under client-pause is not as counted:\n%s", md)
	}
}
