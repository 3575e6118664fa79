package stats

import (
	"fmt"
	"math"
)

// WelchAbove is Welch's two-sample t-test, one-sided: the probability,
// were both samples drawn from normal distributions with the same mean,
// of a t statistic at least as large as the one seen for mean(xs) −
// shift against mean(ys), with the Welch–Satterthwaite degrees of
// freedom (the variances need not be equal). It is the test for a few
// independent trials a side, where a rank test cannot reach a small
// level at all (3 against 3 give no rank-sum p-value below 1/20): on the
// logarithms of throughputs it asks whether one lock is faster than
// another by more than a factor. Least is 0: the statistic is
// continuous. NaNs and infinities are left out; fewer than 2 values a
// side is no evidence (P and Least 1), and so are two samples without
// any spread (their means are then known exactly, and differ or not:
// P is 0 or 1).
func WelchAbove(xs, ys []float64, shift float64) (Shift, error) {
	if math.IsNaN(shift) || math.IsInf(shift, 0) {
		return Shift{}, fmt.Errorf("welch test: shift %v: need a finite number", shift)
	}
	mx, vx, nx := moments(xs)
	my, vy, ny := moments(ys)
	if nx < 2 || ny < 2 {
		return Shift{P: 1, Least: 1}, nil
	}
	d := mx - shift - my
	se2 := vx/float64(nx) + vy/float64(ny)
	if se2 == 0 {
		if d > 0 {
			return Shift{P: 0, Least: 0}, nil
		}
		return Shift{P: 1, Least: 0}, nil
	}
	t := d / math.Sqrt(se2)
	a, b := vx/float64(nx), vy/float64(ny)
	df := se2 * se2 / (a*a/float64(nx-1) + b*b/float64(ny-1))
	return Shift{P: StudentTAbove(t, df), Least: 0}, nil
}

// StudentTAbove is P(T > t) for T of Student's t distribution with df
// degrees of freedom (df > 0; fractional df are allowed).
func StudentTAbove(t, df float64) float64 {
	if math.IsNaN(t) || !(df > 0) {
		return math.NaN()
	}
	if math.IsInf(t, 1) {
		return 0
	}
	if math.IsInf(t, -1) {
		return 1
	}
	tail := 0.5 * regIncBeta(df/2, 0.5, df/(df+t*t))
	if t < 0 {
		return 1 - tail
	}
	return tail
}

// moments returns the mean, the unbiased variance and the count of the
// finite values of xs.
func moments(xs []float64) (mean, variance float64, n int) {
	sum := 0.0
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			sum += x
			n++
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	mean = sum / float64(n)
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			variance += (x - mean) * (x - mean)
		}
	}
	if n > 1 {
		variance /= float64(n - 1)
	}
	return mean, variance, n
}
