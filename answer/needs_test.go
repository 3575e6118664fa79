package answer

import (
	"math"
	"testing"

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
