package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestRankSumAboveKnownValues(t *testing.T) {
	for _, c := range []struct {
		name     string
		xs, ys   []float64
		shift    float64
		p, least float64
	}{
		// Complete separation of 3 against 3: 1 of C(6,3) = 20 splits.
		{"3 above 3", []float64{4, 5, 6}, []float64{1, 2, 3}, 0, 1.0 / 20, 1.0 / 20},
		{"3 below 3", []float64{1, 2, 3}, []float64{4, 5, 6}, 0, 1, 1.0 / 20},
		// n = m = 4, one inversion: U = 15, P(U ≥ 15) = 2/70.
		{"4 against 4, one inversion", []float64{4, 6, 7, 8}, []float64{1, 2, 3, 5}, 0, 2.0 / 70, 1.0 / 70},
		// n = m = 5, U = 20: partitions of 0..5 into at most 5 parts ≤ 5:
		// 1+1+2+3+5+7 = 19 of C(10,5) = 252 (R: wilcox.test(c(8,9,10,11,12),
		// c(1,2,3,4,13), alternative = "greater") gives 0.0754).
		{"5 against 5, U = 20", []float64{8, 9, 10, 11, 12}, []float64{1, 2, 3, 4, 13}, 0, 19.0 / 252, 1.0 / 252},
		// 0/1 data is Fisher's exact test: 5 of 10 against 0 of 10,
		// P = C(10,5)/C(20,5) = 252/15504.
		{"Fisher 5/10 against 0/10", ones(5, 10), ones(0, 10), 0, 252.0 / 15504, 252.0 / 15504},
		// 3 of 3 against 0 of 3: 1/20 again.
		{"Fisher 3/3 against 0/3", ones(3, 3), ones(0, 3), 0, 1.0 / 20, 1.0 / 20},
		{"all tied", []float64{1, 1}, []float64{1, 1}, 0, 1, 1},
		// The margin is part of the hypothesis: 0.15 above, by more than 0.1?
		{"above, but not by the margin", []float64{0.60, 0.61, 0.62}, []float64{0.55, 0.56, 0.57}, 0.1, 1, 1.0 / 20},
		{"above by the margin", []float64{0.80, 0.81, 0.82}, []float64{0.55, 0.56, 0.57}, 0.1, 1.0 / 20, 1.0 / 20},
		// A recovery that never came lies above every finite one.
		{"never recovered", []float64{math.Inf(1), math.Inf(1), math.Inf(1)}, []float64{0.1, 0.2, 0.3}, 1, 1.0 / 20, 1.0 / 20},
		{"no evidence", nil, []float64{1, 2}, 0, 1, 1},
		{"NaN left out", []float64{4, 5, 6, math.NaN()}, []float64{1, 2, 3}, 0, 1.0 / 20, 1.0 / 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := RankSumAbove(c.xs, c.ys, c.shift)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.P-c.p) > 1e-9 || math.Abs(got.Least-c.least) > 1e-9 {
				t.Errorf("RankSumAbove = %+v, want P %.6f, Least %.6f", got, c.p, c.least)
			}
		})
	}
	if _, err := RankSumAbove([]float64{1}, []float64{2}, math.NaN()); err == nil {
		t.Error("a NaN shift was accepted")
	}
}

// ones is k ones and n−k zeros: injections with and without an event.
func ones(k, n int) []float64 {
	out := make([]float64, n)
	for i := range k {
		out[i] = 1
	}
	return out
}

// TestRankSumAboveNormalAgrees: past the exact limit the normal
// approximation takes over; on 20 against 20 (ties included) it must
// stay close to the exact value, and doubling a sample must sharpen it.
func TestRankSumAboveNormalAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		xs, ys := make([]float64, 20), make([]float64, 20)
		for i := range xs {
			xs[i], ys[i] = math.Round(rng.NormFloat64()*3+1.5), math.Round(rng.NormFloat64()*3)
		}
		exact, _ := rankSumAbove(xs, ys, 0, exactLimit)
		approx, _ := rankSumAbove(xs, ys, 0, 0)
		if math.Abs(exact.P-approx.P) > 0.02 {
			t.Errorf("exact %.4f and normal %.4f disagree on 20 against 20", exact.P, approx.P)
		}
		if exact.Least > approx.Least+1e-3 {
			t.Errorf("least p: exact %.3g, normal %.3g", exact.Least, approx.Least)
		}
		big, _ := RankSumAbove(append(xs, xs...), append(ys, ys...), 0)
		if exact.P < 0.3 && big.P > exact.P {
			t.Errorf("doubled samples weakened the test: %.4f → %.4f", exact.P, big.P)
		}
	}
}

func TestRankSumAboveFalsePositiveRate(t *testing.T) {
	// Same distribution, 3 against 3: the one-sided test rejects at 5%
	// exactly when the ranges separate, 1 time in 20.
	rng := rand.New(rand.NewPCG(7, 9))
	const runs = 4000
	hits := 0
	for range runs {
		xs, ys := make([]float64, 3), make([]float64, 3)
		for i := range xs {
			xs[i], ys[i] = rng.Float64(), rng.Float64()
		}
		if s, _ := RankSumAbove(xs, ys, 0); s.P <= 0.05 {
			hits++
		}
	}
	if rate := float64(hits) / runs; rate > 0.065 || rate < 0.035 {
		t.Errorf("3 against 3 from one distribution rejected %.3f of the time, want 0.05", rate)
	}
}

func TestSignificant(t *testing.T) {
	three := Shift{P: 0.05, Least: 0.05} // 3 against 3, fully separated
	eight := Shift{P: 1.0 / 12870, Least: 1.0 / 12870}
	for _, c := range []struct {
		name   string
		tests  []Shift
		reject []bool
		k      int
	}{
		// 40 comparisons of 3 against 3, all separated: none can pass.
		{"many 3 against 3", repeat(three, 40), make([]bool, 40), 2},
		// The untestable ones do not dilute a clear 8 against 8.
		{"one clear among untestable", append(repeat(three, 40), eight), append(make([]bool, 40), true), 2},
		{"one test alone at 5%", []Shift{three}, []bool{true}, 1},
		{"empty", nil, []bool{}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rej, level, k, err := Significant(c.tests, 0.05)
			if err != nil {
				t.Fatal(err)
			}
			if k != c.k || math.Abs(level-0.05/float64(c.k)) > 1e-12 {
				t.Errorf("K = %d, level %v; want K = %d", k, level, c.k)
			}
			for i := range rej {
				if rej[i] != c.reject[i] {
					t.Fatalf("rejected %v, want %v", rej, c.reject)
				}
			}
		})
	}
	if _, _, _, err := Significant(nil, 1); err == nil {
		t.Error("level 1 accepted")
	}
}

func repeat(s Shift, n int) []Shift {
	out := make([]Shift, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestSamplesToSeparate(t *testing.T) {
	for _, c := range []struct{ k, want int }{
		{1, 3},   // 1/C(6,3) = 1/20 = 0.05 exactly
		{2, 4},   // 1/70 ≤ 0.025
		{4, 5},   // 1/70 > 0.0125, 1/252 ≤
		{100, 7}, // 1/1716 > 0.0005, 1/3432 ≤
	} {
		if got := SamplesToSeparate(0.05, c.k); got != c.want {
			t.Errorf("SamplesToSeparate(0.05, %d) = %d, want %d", c.k, got, c.want)
		}
	}
	if SamplesToSeparate(0, 1) != 0 || SamplesToSeparate(0.05, 0) != 0 {
		t.Error("bad input gave a count")
	}
}
