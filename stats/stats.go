// Package stats holds the little statistics lockbench's conclusions rest
// on: exact binomial bounds for violation rates, so that "no violation"
// always comes with how little it proves, and the spread of repeated
// measurements, so that "faster" is only said when the spread allows it.
// Rate carries a count with its trials and bounds; Spread a set of
// repeated measurements with their range.
// It imports nothing of lockbench.
package stats

import (
	"fmt"
	"math"
)

// UpperBound returns the exact one-sided upper confidence bound
// (Clopper–Pearson) on the rate p of an event seen k times in n trials:
// the largest p under which seeing k or fewer has probability at least
// 1 − confidence. For k = 0 it is 1 − (1 − confidence)^(1/n): zero
// failures in 4 tries bound the rate by 53% at 95%, in 300 tries by 1%.
// The error names bad input (n < 1, k outside [0, n], a confidence
// outside (0, 1)).
func UpperBound(k, n int, confidence float64) (float64, error) {
	switch {
	case n < 1:
		return 0, fmt.Errorf("binomial bound: %d trials: need at least 1", n)
	case k < 0 || k > n:
		return 0, fmt.Errorf("binomial bound: %d events in %d trials: need 0 ≤ events ≤ trials", k, n)
	case !(confidence > 0 && confidence < 1):
		return 0, fmt.Errorf("binomial bound: confidence %v: need a number between 0 and 1", confidence)
	}
	alpha := 1 - confidence
	if k == n {
		return 1, nil
	}
	if k == 0 {
		return 1 - math.Pow(alpha, 1/float64(n)), nil
	}
	// P(X ≤ k; p) falls as p grows: bisect for the p where it is alpha.
	lo, hi := float64(k)/float64(n), 1.0
	for range 200 {
		mid := (lo + hi) / 2
		if binomialCDF(k, n, mid) > alpha {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, nil
}

// Upper95 is UpperBound at 95% confidence, for callers whose k and n are
// known to be valid; it returns 1 (no bound) for n < 1.
func Upper95(k, n int) float64 {
	b, err := UpperBound(k, n, 0.95)
	if err != nil {
		return 1
	}
	return b
}

// binomialCDF is P(X ≤ k) for X ~ Binomial(n, p), summed in log space.
func binomialCDF(k, n int, p float64) float64 {
	if p <= 0 {
		return 1
	}
	if p >= 1 {
		return 0
	}
	lp, lq := math.Log(p), math.Log1p(-p)
	lgN, _ := math.Lgamma(float64(n + 1))
	var sum float64
	for i := 0; i <= k; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgR, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - lgI - lgR + float64(i)*lp + float64(n-i)*lq)
	}
	return min(sum, 1)
}
