package answer

import (
	"math"

	"github.com/lockbench/lockbench/stats"
)

// speedTrials is the independent trials a side, in all, with which
// Welch's test on log throughput at level sets a apart from b with
// probability power, were the new trials to differ as the trials so far
// lean: by the lower 80% confidence bound of their difference, and by
// no less than the practical margin (speedMargin).
//
// It is conditional power: the trials already run stay in the test,
// and a comparison still undecided after a look is, more often than
// not, one whose first trials came out unluckily close; planning as if
// they had not been run (unconditional power) leaves exactly those
// comparisons short. The new trials follow the trend, not the margin:
// a lock measured at a tenth of the other's speed is not planned for as
// if the rest of its trials were to come within 25% of it, which asks
// for hundreds of trials where a few settle it. The bound, not the
// estimate, keeps a lucky start from planning too few; the spread is
// the upper 80% confidence bound of the pooled one for the same reason.
func speedTrials(a, b *backend, level, power float64) int {
	la, lb := logs(a.speeds), logs(b.speeds)
	if !a.independent || !b.independent || len(la) < 2 || len(lb) < 2 {
		return max(normalN(math.Log(speedMargin), speedSpread, level, power), 3)
	}
	sd, df := pooledSD(la, lb)
	sd = math.Max(sd*upperFactor(df), 0.02)
	d0 := mean(la) - mean(lb)
	na, nb := len(la), len(lb)
	if d0 < 0 {
		d0, na, nb = -d0, nb, na
	}
	delta := math.Max(math.Log(speedMargin), d0-tAbove(0.2, float64(df))*sd*math.Sqrt(1/float64(na)+1/float64(nb)))
	for n := max(na, nb, 2); n <= maxPlanned; n++ {
		if conditionalPower(n, na, nb, d0, delta, sd, level) >= power {
			return n
		}
	}
	return maxPlanned
}

// conditionalPower is the chance that a one-sided test at level of two
// means, n samples a side in all, rejects, given the na and nb samples
// a side already seen, whose means differ by d0, and new samples whose
// means differ by delta, all of spread sd (normal approximation, with
// Student's t quantile at 2n−2 degrees of freedom for the critical
// value).
func conditionalPower(n, na, nb int, d0, delta, sd, level float64) float64 {
	fn := float64(n)
	// The final difference of means: the seen part weighted by its share.
	expect := (float64(na)*d0 + (fn-float64(na))*delta) / fn
	vr := sd * sd * (fn - float64(na) + fn - float64(nb)) / (fn * fn)
	crit := tAbove(level, 2*fn-2) * sd * math.Sqrt(2/fn)
	if vr <= 0 {
		if expect > crit {
			return 1
		}
		return 0
	}
	return 0.5 * math.Erfc(-(expect-crit)/math.Sqrt(2*vr))
}

// tAbove is Student's t quantile with p above it at df degrees of
// freedom (bisection on stats.StudentTAbove).
func tAbove(p, df float64) float64 {
	lo, hi := 0.0, 1e3
	for range 100 {
		m := (lo + hi) / 2
		if stats.StudentTAbove(m, df) > p {
			lo = m
		} else {
			hi = m
		}
	}
	return hi
}

// upperFactor is what a standard deviation estimated with df degrees of
// freedom is multiplied by for its upper 80% confidence bound:
// sqrt(df / χ²(df) at its 20% quantile), by the Wilson–Hilferty
// approximation of the quantile.
func upperFactor(df int) float64 {
	if df < 1 {
		return 1
	}
	const z20 = -0.8416 // the standard normal's 20% quantile
	v := 2 / (9 * float64(df))
	q := float64(df) * math.Pow(1-v+z20*math.Sqrt(v), 3)
	if !(q > 0) {
		return 3 // one degree of freedom: the approximation fails; the exact factor is 3.9
	}
	return math.Sqrt(float64(df) / q)
}

// upperSD is the upper 80% confidence bound of the pooled standard
// deviation of two samples.
func upperSD(xs, ys []float64) float64 {
	sd, df := pooledSD(xs, ys)
	return sd * upperFactor(df)
}

// mean is the mean of xs (0 when empty).
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// pooledSD is the pooled standard deviation of the finite values of two
// samples, and its degrees of freedom.
func pooledSD(xs, ys []float64) (float64, int) {
	var ss float64
	n := 0
	for _, s := range [][]float64{xs, ys} {
		var finite []float64
		for _, v := range s {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				finite = append(finite, v)
			}
		}
		if len(finite) < 2 {
			continue
		}
		m := mean(finite)
		for _, v := range finite {
			ss += (v - m) * (v - m)
		}
		n += len(finite) - 1
	}
	if n == 0 {
		return 0, 0
	}
	return math.Sqrt(ss / float64(n)), n
}
