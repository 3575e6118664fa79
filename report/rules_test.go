package report_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// The recommendation rules, held to their words on the worlds of
// world_test.go.

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
	// Without the run's record, the report says it does not know why:
	// the reasons are the backends', recorded by the runner, and the
	// report keeps no table of its own.
	w.f.Skipped = nil
	v := verdict(t, report.Recommend(w.f).Correctness, "etcd")
	if !slices.ContainsFunc(v.NotJudged, func(s string) bool {
		return strings.HasPrefix(s, "clock-jump — not judged: not run (the results do not say why)")
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
		{"separate ranges of 5 trials: the faster wins", []float64{900, 950, 1000, 1050, 1100}, []float64{1500, 1550, 1600, 1650, 1700}, "redlock", false, "recommended"},
		// 3 against 3 separated is p = 1/20: not below 5% once the
		// family holds more than one comparison that could reach it.
		{"separate ranges of 3 trials are too few in a family", []float64{900, 1000, 1100}, []float64{1500, 1600, 1700}, "etcd", true, "tied with etcd"},
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
	w.fault("etcd", "server-pause", 2, outcome{injections: 10, share: 0.6, windows: spreadOut(0.6, 10), recovery: []float64{0.5, 0.7}}, "fence")
	w.fault("redis", "server-pause", 2, outcome{injections: 10, share: 0.01, windows: spreadOut(0.01, 10), recovery: []float64{6, -1}}, "fence")
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
		for i, tp := range map[string][]float64{"etcd": {1500, 1550, 1600, 1650, 1700}, "redis": {9000, 9250, 9500, 9750, 10000}}[b] {
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
