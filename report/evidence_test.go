package report_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// The tests of issue 21's evidence rules, on the worlds of world_test.go:
// only tested injections count and an injection is one trial, the
// contract's classes (ambiguous apart), the fenced verdict that must be
// true, an answer that holds still, trials that share servers, and stale
// writes told from silent.

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

// TestNoGrantIsNoVerdict: a history in which nothing was granted (a
// short throughput trial whose one acquire was still waiting at its end)
// has nothing for the fenced check; it neither passes nor disqualifies,
// and the report counts it apart. (A ZooKeeper trial of 0.5 s with one
// client that granted nothing once disqualified ZooKeeper from a whole
// make bench answer.)
func TestNoGrantIsNoVerdict(t *testing.T) {
	w := twoLocks(t)
	for i := range w.f.Cases {
		if c := &w.f.Cases[i]; c.Backend == "etcd" && c.FaultClass == "crash-minority" && c.Trial == 1 {
			c.Acquired = 0
			c.LinearizableFenced, c.LinearizableFencedReason = results.Unknown, results.NoGrant
		}
	}
	v := verdict(t, report.Recommend(w.f).Correctness, "etcd")
	if !v.Qualifies {
		t.Errorf("etcd with one history that granted nothing: %+v", v)
	}
	if md := render(t, w.f); !strings.Contains(md, "no grant to check ×1") {
		t.Errorf("the report does not count the history without grants apart")
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
// name the same two backends, and the first says that the test set them
// apart and the second what would settle the tie.
func TestTheAnswerHoldsStill(t *testing.T) {
	run := func(redisShare float64) report.Choice {
		w := newWorld(t).perf("etcd", 900, 1000, 1100).perf("redis", 950, 1000, 1050)
		for _, b := range []string{"etcd", "redis"} {
			w.fault(b, "client-pause?x=3", 2, pauseClean, "none", "fence")
		}
		w.fault("etcd", "server-pause", 3, outcome{injections: 10, share: 0.6, windows: spreadOut(0.6, 10), recovery: []float64{0.5, 0.6}}, "fence")
		w.fault("redis", "server-pause", 3, outcome{injections: 10, share: redisShare, windows: spreadOut(redisShare, 10), recovery: []float64{0.5, 0.6}}, "fence")
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
	if !strings.Contains(apart.Answer, "redis is tied with it on safety and set apart by availability or speed, where the rank-sum test found a difference") {
		t.Errorf("the answer resting on availability does not say so:\n%s", apart.Answer)
	}
	if !strings.Contains(strings.Join(close.Evidence, "\n"), "What would settle the order between redis and etcd") {
		t.Errorf("the tie does not say what would settle it:\n%s", strings.Join(close.Evidence, "\n"))
	}
}

// TestTrialsOnSharedServersCountAsOne: speed ranges that separate, from
// five trials that ran on the same servers, call nobody faster; on fresh
// servers each, they do.
func TestTrialsOnSharedServersCountAsOne(t *testing.T) {
	w := newWorld(t).perf("etcd", 900, 950, 1000, 1050, 1100).perf("redlock", 2000, 2050, 2100, 2150, 2200)
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

// TestFencedMeansTheStrongestTokenCheck: a paused holder whose late write
// write-only fencing let in (its successor had not written yet) while
// the same case under fence-rw rejected it does not disqualify the lock:
// its tokens protect a resource that checks them on reads too. Without a
// fence-rw judgement of the case, the accepted write disqualifies it.
func TestFencedMeansTheStrongestTokenCheck(t *testing.T) {
	for _, judgedRW := range []bool{true, false} {
		t.Run(fmt.Sprintf("fence-rw=%v", judgedRW), func(t *testing.T) {
			w := twoLocks(t)
			late := outcome{injections: 3, expired: 2, staleAccepted: 2, share: 0.5, recovery: []float64{0}}
			w.fault("etcd", "client-pause?at=extend", 1, late, "none", "fence")
			if judgedRW {
				w.fault("etcd", "client-pause?at=extend", 1, outcome{injections: 3, expired: 2, staleRejected: 2, share: 0.5, recovery: []float64{0}}, "fence-rw")
			}
			v := verdict(t, report.Recommend(w.f).Correctness, "etcd")
			if v.Qualifies != judgedRW {
				t.Errorf("etcd, late writes let in by fence, fence-rw judged %v: qualifies %v (%s)", judgedRW, v.Qualifies, v.Reason)
			}
			if !judgedRW && !strings.Contains(v.Reason, "stale writes accepted") {
				t.Errorf("the reason does not name the stale writes: %s", v.Reason)
			}
		})
	}
}
