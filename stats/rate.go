package stats

import (
	"fmt"
	"math"
)

// LowerBound returns the exact one-sided lower confidence bound
// (Clopper–Pearson) on the rate p of an event seen k times in n trials:
// the smallest p under which seeing k or more has probability at least
// 1 − confidence. It is 0 for k = 0. With UpperBound it tells whether
// two rates are really different: when one's lower bound lies above the
// other's upper bound. The error names bad input as UpperBound's does.
func LowerBound(k, n int, confidence float64) (float64, error) {
	if _, err := UpperBound(k, n, confidence); err != nil {
		return 0, err
	}
	alpha := 1 - confidence
	if k == 0 {
		return 0, nil
	}
	if k == n {
		return math.Pow(alpha, 1/float64(n)), nil
	}
	// P(X ≥ k; p) = 1 − P(X ≤ k−1; p) rises with p: bisect for alpha.
	lo, hi := 0.0, float64(k)/float64(n)
	for range 200 {
		mid := (lo + hi) / 2
		if 1-binomialCDF(k-1, n, mid) < alpha {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, nil
}

// Rate is K events in N trials — incidents in injections, stale writes
// in injections, overlaps in grants — with its exact one-sided 95%
// bounds. The bounds treat each trial as one that failed or did not:
// when events outnumber trials (several in one injection) they use N
// events, so the upper bound is 1 and says only that the rate is high;
// the count itself says the rest.
type Rate struct{ K, N int64 }

// Known reports whether there was any trial to judge by: a rate of 0 in
// 0 is no evidence at all, and must read "not judged", never "none".
func (r Rate) Known() bool { return r.N > 0 && r.K >= 0 }

// Observed is K/N, the point estimate; NaN without trials.
func (r Rate) Observed() float64 {
	if !r.Known() {
		return math.NaN()
	}
	return float64(r.K) / float64(r.N)
}

// capped returns k and n as ints with k ≤ n.
func (r Rate) capped() (int, int) {
	n := int(min(r.N, math.MaxInt32))
	k := int(min(r.K, int64(n)))
	return k, n
}

// Upper95 is the one-sided 95% upper bound: 1 − 0.05^(1/N) for zero
// events (0 in 40 injections: 7.2%). It is 1 (no bound) without trials.
func (r Rate) Upper95() float64 {
	if !r.Known() {
		return 1
	}
	k, n := r.capped()
	return Upper95(k, n)
}

// Lower95 is the one-sided 95% lower bound; 0 without trials or events.
func (r Rate) Lower95() float64 {
	if !r.Known() {
		return 0
	}
	k, n := r.capped()
	b, err := LowerBound(k, n, 0.95)
	if err != nil {
		return 0
	}
	return b
}

// Above reports whether r is clearly higher than s: r's lower bound lies
// above s's upper bound. A rate without trials is never above or below
// anything.
func (r Rate) Above(s Rate) bool { return r.Known() && s.Known() && r.Lower95() > s.Upper95() }

// Add returns the rate of both samples together.
func (r Rate) Add(s Rate) Rate { return Rate{K: r.K + s.K, N: r.N + s.N} }

// String is "3 in 40" (for logs and tests; the report words it).
func (r Rate) String() string { return fmt.Sprintf("%d in %d", r.K, r.N) }
