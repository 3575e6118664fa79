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

// binomialCDF is P(X ≤ k) for X ~ Binomial(n, p), through the
// regularized incomplete beta function — P(X ≤ k) = I_{1−p}(n−k, k+1) —
// so that its cost does not grow with k (a million events in ten million
// grants is as cheap as three in forty).
func binomialCDF(k, n int, p float64) float64 {
	switch {
	case k >= n || p <= 0:
		return 1
	case k < 0 || p >= 1:
		return 0
	}
	return regIncBeta(float64(n-k), float64(k+1), 1-p)
}

// regIncBeta is the regularized incomplete beta function I_x(a, b), by
// the continued fraction of Numerical Recipes (§6.4), evaluated with
// Lentz's method on whichever side converges fast.
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(a, b, x) / a
	}
	return 1 - front*betaFraction(b, a, 1-x)/b
}

// betaFraction evaluates the continued fraction of I_x(a, b).
func betaFraction(a, b, x float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 10000; m++ {
		fm := float64(m)
		for _, num := range []float64{
			fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm)),
			-(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1)),
		} {
			d = 1 + num*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + num/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			h *= d * c
		}
		if math.Abs(d*c-1) < eps {
			break
		}
	}
	return h
}
