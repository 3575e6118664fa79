package stats

import (
	"math"
	"slices"
)

// Spread summarises repeated measurements of one quantity (the
// throughput of three trials, a p99 per trial): how many, their median
// and their range. Lockbench shows the range rather than a standard
// deviation because three to five trials on a shared machine are too few
// for a distribution to be assumed; the range is what was seen.
type Spread struct {
	N                int
	Median, Min, Max float64
}

// SpreadOf returns the Spread of xs, leaving out NaNs (a measurement that
// does not exist). +Inf is kept: it is how a quantity that never came
// (a recovery that did not happen) is recorded. An empty input gives
// N = 0 and zero values.
func SpreadOf(xs []float64) Spread {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Spread{}
	}
	slices.Sort(v)
	s := Spread{N: len(v), Min: v[0], Max: v[len(v)-1]}
	switch m := len(v) / 2; {
	case len(v)%2 == 1 || math.IsInf(v[m], 1): // Inf − Inf would be NaN
		s.Median = v[m]
	default:
		s.Median = v[m-1] + (v[m]-v[m-1])/2
	}
	return s
}

// Compare says whether the ranges of a and b separate: −1 when all of a
// lies below all of b, +1 when above, and 0 when they overlap or either
// is empty — "indistinguishable here". Equal single values overlap.
// This is the only sense in which lockbench says one backend is faster
// than another.
func (a Spread) Compare(b Spread) int {
	switch {
	case a.N == 0 || b.N == 0:
		return 0
	case a.Max < b.Min:
		return -1
	case a.Min > b.Max:
		return 1
	}
	return 0
}
