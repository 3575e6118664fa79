package report_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/report"
)

// TestEveryFaultWindowIsAnAvailabilitySample: one run of ten windows
// gives ten samples, enough to set a backend apart; the same run's
// three windows are not (3 against 3 cannot reach 5% in a family).
func TestEveryFaultWindowIsAnAvailabilitySample(t *testing.T) {
	for _, c := range []struct {
		windows int
		apart   bool
	}{{10, true}, {3, false}} {
		w := newWorld(t).perf("etcd", 900, 1000, 1100).perf("redis", 3000, 3100, 3200)
		for _, b := range []string{"etcd", "redis"} {
			w.fault(b, "client-pause?x=3", 1, pauseClean, "none", "fence")
		}
		w.fault("etcd", "server-pause", 1, outcome{injections: c.windows, share: 0.6, windows: spreadOut(0.6, c.windows)}, "fence")
		w.fault("redis", "server-pause", 1, outcome{injections: c.windows, share: 0.01, windows: spreadOut(0.01, c.windows)}, "fence")
		ch := report.Recommend(w.f).Efficiency
		if apart := ch.Backend == "etcd"; apart != c.apart {
			t.Errorf("%d windows of one run: chose %s (set apart: %v, want %v)\n%s", c.windows, ch.Backend, apart, c.apart, ch.Answer)
		}
	}
}

// spreadOut is n window shares around share, ±10% of it, in turn.
func spreadOut(share float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = share * (0.9 + 0.2*float64(i)/float64(max(1, n-1)))
	}
	return out
}

// noiseWorld is six backends whose availability under four classes is
// drawn from one distribution — windows fault windows each, shares
// uniform in 0–80% of baseline, recoveries uniform in 0–3 s — and whose
// speeds come from one distribution too: nothing tells them apart but
// chance.
func noiseWorld(t *testing.T, rng *rand.Rand, windows int) *world {
	w := newWorld(t)
	for _, b := range []string{"etcd", "zookeeper", "sentinel", "redis", "redlock", "redsync"} {
		w.perf(b, 1000+400*rng.Float64(), 1000+400*rng.Float64(), 1000+400*rng.Float64())
		w.fault(b, "client-pause?x=3", 1, pauseClean, "none", "fence")
		for _, cls := range []string{"server-pause", "crash-minority", "partition", "latency"} {
			o := outcome{injections: windows, share: 0.4}
			for range windows {
				o.windows = append(o.windows, 0.8*rng.Float64())
				o.recovery = append(o.recovery, 3*rng.Float64())
			}
			w.fault(b, cls, 1, o, "fence")
		}
	}
	return w
}

// TestNoiseSetsNothingApart: backends measured alike must come out tied,
// whatever the seed. With 3 windows a side two backends' ranges are
// disjoint one time in ten by chance, and the rule compares 15 pairs on
// 4 classes and 2 measures: a rule that set a backend apart on disjoint
// ranges did so in nearly every such world. With 8 windows a side the
// test can reject, so chance separations may happen, but in at most
// about 5% of the answers (the family-wise level).
func TestNoiseSetsNothingApart(t *testing.T) {
	for _, c := range []struct {
		windows, worlds, allowed int
	}{
		{3, 10, 0}, // 1/20 is the best p-value: nothing can pass in a family
		{8, 12, 3}, // 5% of 24 answers is 1.2; 3 allows for the draw
	} {
		rng := rand.New(rand.NewPCG(uint64(c.windows), 26))
		apart := 0
		for i := range c.worlds {
			rec := report.Recommend(noiseWorld(t, rng, c.windows).f)
			for _, ch := range []report.Choice{rec.Efficiency, rec.Correctness} {
				for _, v := range ch.Verdicts {
					if strings.HasPrefix(v.Standing, "set apart") {
						apart++
						t.Logf("%d windows, world %d: %s %s", c.windows, i, v.Backend, v.Standing)
						break
					}
				}
			}
		}
		if apart > c.allowed {
			t.Errorf("%d windows a side: %d of %d answers set a backend apart on noise, want at most %d", c.windows, apart, 2*c.worlds, c.allowed)
		}
	}
}

// TestRealDifferenceSetsApart: a clear availability difference with
// enough windows sets the worse backend apart, with the test's p-value
// and level in its standing; the same difference on 3 windows a side
// leaves a tie, and the answer says how many windows would settle it.
func TestRealDifferenceSetsApart(t *testing.T) {
	build := func(windows int) *world {
		w := newWorld(t).perf("etcd", 900, 1000, 1100).perf("zookeeper", 900, 1000, 1100)
		for _, b := range []string{"etcd", "zookeeper"} {
			w.fault(b, "client-pause?x=3", 1, pauseClean, "none", "fence")
			w.fault(b, "crash-minority", 1, outcome{injections: windows, share: 0.6, windows: spreadOut(0.6, windows)}, "fence")
		}
		w.fault("etcd", "partition", 1, outcome{injections: windows, share: 0.1, windows: spreadOut(0.1, windows)}, "fence")
		w.fault("zookeeper", "partition", 1, outcome{injections: windows, share: 0.5, windows: spreadOut(0.5, windows)}, "fence")
		return w
	}
	rec := report.Recommend(build(8).f)
	for _, ch := range []report.Choice{rec.Efficiency, rec.Correctness} {
		if ch.Backend != "zookeeper" || len(ch.Tied) > 0 {
			t.Fatalf("8 windows of a clear difference: chose %s tied with %v\n%s", ch.Backend, ch.Tied, ch.Answer)
		}
		v := verdict(t, ch, "etcd")
		if !strings.HasPrefix(v.Standing, "set apart on availability: under partition") || !strings.Contains(v.Standing, "rank-sum p = ") ||
			!strings.Contains(v.Standing, "by more than 10 points") || !strings.Contains(v.Standing, "step-down over this answer's") {
			t.Errorf("etcd's standing %q", v.Standing)
		}
	}
	rec = report.Recommend(build(3).f)
	ch := rec.Correctness
	if len(ch.Tied)+len(ch.Alike) == 0 {
		t.Fatalf("3 windows a side set a backend apart: chose %s\n%s", ch.Backend, ch.Answer)
	}
	settle := ""
	for _, e := range ch.Evidence {
		if strings.HasPrefix(e, "What would settle") {
			settle = e
		}
	}
	if !regexp.MustCompile(`this run has [23](–3)? fault windows per class and backend`).MatchString(settle) || !regexp.MustCompile(`only with at least \d+ samples a side`).MatchString(settle) {
		t.Errorf("the tie does not say what would settle it, computed: %q", settle)
	}
}
