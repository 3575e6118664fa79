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

// StrataAbove combines one-sided rank-sum comparisons over strata (the
// fault classes two locks both faced) into one test, in the manner of
// van Elteren's test with equal weights: the U statistics of the strata
// (each of xs − shift against ys, ties counting half) are summed and
// held to the normal distribution of their sum under exchangeability
// within each stratum, with the tie correction and a continuity
// correction of ½. One stratum is RankSumAbove itself (exact for small
// samples). Strata with an empty side add nothing; with none left P and
// Least are 1.
func StrataAbove(xs, ys [][]float64, shift float64) (Shift, error) {
	if len(xs) != len(ys) {
		return Shift{}, fmt.Errorf("strata test: %d strata of xs against %d of ys", len(xs), len(ys))
	}
	if math.IsNaN(shift) || math.IsInf(shift, 0) {
		return Shift{}, fmt.Errorf("strata test: shift %v: need a finite number", shift)
	}
	var used []int
	for i := range xs {
		if finiteCount(xs[i]) > 0 && finiteCount(ys[i]) > 0 {
			used = append(used, i)
		}
	}
	switch len(used) {
	case 0:
		return Shift{P: 1, Least: 1}, nil
	case 1:
		return RankSumAbove(xs[used[0]], ys[used[0]], shift)
	}
	var u, top, mean, variance float64
	for _, i := range used {
		su, stop, smean, svar := uMoments(xs[i], ys[i], shift)
		u, top, mean, variance = u+su, top+stop, mean+smean, variance+svar
	}
	if variance <= 0 {
		return Shift{P: 1, Least: 1}, nil
	}
	tail := func(v float64) float64 {
		z := (v - mean - 0.5) / math.Sqrt(variance)
		return min(1, 0.5*math.Erfc(z/math.Sqrt2))
	}
	return Shift{P: tail(u), Least: tail(top)}, nil
}

// finiteCount counts the values of xs that are not NaN.
func finiteCount(xs []float64) int {
	n := 0
	for _, x := range xs {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}

// uMoments returns the U statistic of xs − shift against ys (pairs with
// the x above, ties half), the largest U the pooled values allow, and
// U's mean and tie-corrected variance under exchangeability.
func uMoments(xs, ys []float64, shift float64) (u, top, mean, variance float64) {
	var x, y []float64
	for _, v := range xs {
		if !math.IsNaN(v) {
			x = append(x, v-shift)
		}
	}
	for _, v := range ys {
		if !math.IsNaN(v) {
			y = append(y, v)
		}
	}
	for _, a := range x {
		for _, b := range y {
			switch {
			case a > b:
				u++
			case a == b:
				u += 0.5
			}
		}
	}
	n, m := float64(len(x)), float64(len(y))
	pool := append(append([]float64{}, x...), y...)
	counts := map[float64]int{}
	for _, v := range pool {
		counts[v]++
	}
	N := n + m
	ties := 0.0
	for _, c := range counts {
		t := float64(c)
		ties += t*t*t - t
	}
	// The largest U: the x values take the top ranks of the pool; within
	// a tie block only half of the cross pairs count.
	top = maxU(pool, len(x))
	return u, top, n * m / 2, n * m / 12 * ((N + 1) - ties/(N*(N-1)))
}

// maxU is the largest U statistic n values drawn from pool could have
// against the rest.
func maxU(pool []float64, n int) float64 {
	sorted := append([]float64{}, pool...)
	for i := 1; i < len(sorted); i++ { // insertion sort: strata are small
		for j := i; j > 0 && sorted[j] > sorted[j-1]; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	x, y := sorted[:n], sorted[n:]
	u := 0.0
	for _, a := range x {
		for _, b := range y {
			switch {
			case a > b:
				u++
			case a == b:
				u += 0.5
			}
		}
	}
	return u
}
