package answer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// TestFisherAboveAgrees holds the hypergeometric tail to the rank-sum
// test on 0/1 samples, which is Fisher's exact test.
func TestFisherAboveAgrees(t *testing.T) {
	for _, n := range []int{1, 3, 5, 10} {
		for k1 := 0; k1 <= n; k1++ {
			for k0 := 0; k0 <= n; k0++ {
				want, err := stats.RankSumAbove(ones(stats.Rate{K: int64(k1), N: int64(n)}), ones(stats.Rate{K: int64(k0), N: int64(n)}), 0)
				if err != nil {
					t.Fatal(err)
				}
				if got := fisherAbove(k1, k0, n); math.Abs(got-want.P) > 1e-9 {
					t.Errorf("fisherAbove(%d, %d, %d) = %v, rank-sum says %v", k1, k0, n, got, want.P)
				}
			}
		}
	}
}

// TestInjectionsFor: the planned injections reach the power, and one
// fewer does not (the bisection found the least).
func TestInjectionsFor(t *testing.T) {
	for _, tt := range []struct{ lo, hi, level float64 }{{0, 0.5, 0.05}, {0, 0.5, 0.001}, {0.2, 0.7, 0.0025}} {
		n := injectionsFor(tt.lo, tt.hi, tt.level, Power)
		if fisherPower(n, tt.lo, tt.hi, tt.level) < Power {
			t.Errorf("%+v: %d injections give power %.2f", tt, n, fisherPower(n, tt.lo, tt.hi, tt.level))
		}
		t.Logf("%+v: %d injections a side", tt, n)
	}
}

// TestFisherShiftAgrees holds fisherShift's p-value and least p-value to
// the rank-sum test on 0/1 samples of unequal sizes.
func TestFisherShiftAgrees(t *testing.T) {
	for _, n := range [][2]int64{{3, 5}, {6, 4}, {12, 12}, {1, 9}} {
		for k1 := int64(0); k1 <= n[0]; k1++ {
			for k0 := int64(0); k0 <= n[1]; k0++ {
				w, b := stats.Rate{K: k1, N: n[0]}, stats.Rate{K: k0, N: n[1]}
				want, err := stats.RankSumAbove(ones(w), ones(b), 0)
				if err != nil {
					t.Fatal(err)
				}
				got := fisherShift(w, b)
				if math.Abs(got.P-want.P) > 1e-9 || math.Abs(got.Least-want.Least) > 1e-9 {
					t.Errorf("%v against %v: fisherShift %+v, rank-sum %+v", w, b, got, want)
				}
			}
		}
	}
}

// TestSpeedTrialsFollowTheTrend: trials that lean far apart plan a few
// more, not the hundreds a difference at the margin would need (make
// bench's rueidislock against etcd, about 10× apart from 3 trials a
// side, once asked for 200); and the trials planned are enough: drawn
// from what was measured (its means and spread), the completed samples
// separate at the level with at least the power asked. Trials that lean
// within the margin still plan for the margin.
func TestSpeedTrialsFollowTheTrend(t *testing.T) {
	const level, power = 0.0125 / 106, 0.97
	fast := &backend{name: "fast", independent: true, speeds: []float64{7030, 8260, 9340}}
	slow := &backend{name: "slow", independent: true, speeds: []float64{404, 804, 862}}
	near := &backend{name: "near", independent: true, speeds: []float64{7200, 8130, 8900}}
	n := speedTrials(fast, slow, level, power)
	t.Logf("10x apart from 3 trials a side: %d trials a side", n)
	if n > 20 {
		t.Errorf("10x apart: %d trials a side planned, want a few", n)
	}
	if m := speedTrials(fast, near, level, power); m < 50 {
		t.Errorf("2%% apart: %d trials a side planned, want what the 25%% margin needs (dozens)", m)
	}
	r := rand.New(rand.NewPCG(28, 3))
	la, lb := logs(fast.speeds), logs(slow.speeds)
	sd, _ := pooledSD(la, lb)
	const sims = 2000
	hit := 0
	for range sims {
		xs, ys := slices.Clone(la), slices.Clone(lb)
		for len(xs) < n {
			xs = append(xs, mean(la)+sd*r.NormFloat64())
		}
		for len(ys) < n {
			ys = append(ys, mean(lb)+sd*r.NormFloat64())
		}
		if s, err := stats.WelchAbove(xs, ys, 0); err == nil && s.P <= level {
			hit++
		}
	}
	if got := float64(hit) / sims; got < power-0.02 {
		t.Errorf("%d trials a side drawn as measured separate in %.1f%%, want at least %.0f%%", n, got*100, power*100)
	}
}

// TestSpeedPointKeepsItsTrials: once the rounds added trials at a
// backend's peak client count, that count stays the one compared even
// when another's median of fewer trials comes out higher; the trials
// added are not thrown away.
func TestSpeedPointKeepsItsTrials(t *testing.T) {
	f := &results.File{}
	add := func(clients, trial int, tp float64) {
		f.Cases = append(f.Cases, results.Case{Backend: "redis", Workload: "uniform", Fault: "none", FaultClass: "none", Guard: "none",
			Clients: clients, Trial: trial, FreshServers: true, Throughput: tp})
	}
	for trial := range 8 {
		add(16, trial, 4000)
	}
	for trial := range 3 {
		add(64, trial, 4100)
	}
	w, clients, ok := SpeedPoint(f, "redis")
	if !ok || w != "uniform" || clients != 16 {
		t.Errorf("SpeedPoint = %q, %d, %v; want uniform at 16 clients, its 8 trials", w, clients, ok)
	}
	if _, _, ok := SpeedPoint(f, "etcd"); ok {
		t.Error("SpeedPoint of a backend without trials: ok")
	}
}
