package stats

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Shift is the outcome of RankSumAbove: the one-sided p-value of "xs lie
// above ys by more than the shift", and Least, the smallest p-value the
// test could have given on these pooled values whatever their order (one
// over the number of ways to split them, with ties).
//
// Least is what makes Tarone's correction possible (see Significant): a
// comparison whose Least already exceeds the corrected level could not
// have set anything apart, so it does not dilute the others.
type Shift struct{ P, Least float64 }

// exactLimit bounds the product of the two sample sizes for which
// RankSumAbove enumerates the permutation distribution exactly (20
// windows against 20 take a few milliseconds); past it the normal
// approximation with the tie correction is used.
const exactLimit = 400

// RankSumAbove is the Wilcoxon–Mann–Whitney rank-sum test, one-sided:
// the probability, were the labels of the pooled values exchangeable,
// of a U statistic at least as large as the one seen for xs − shift
// against ys (U counts the pairs in which the x lies above the y, a tie
// counting half). It asks whether xs lie above ys by more than shift, so
// that a practical margin is part of what is tested rather than a second
// rule beside it. It assumes nothing about the distribution but
// independent samples; ties (equal values, many zeros) are handled
// exactly. On 0/1 samples it is Fisher's exact test.
//
// The p-value is exact (the permutation distribution, enumerated by
// dynamic programming over tie blocks) when len(xs)·len(ys) ≤ 400, and
// the normal approximation with continuity and tie corrections beyond.
// NaNs are left out; +Inf is a value like any other (a recovery that
// never came lies above every finite one). With an empty side there is
// no evidence: P and Least are 1.
func RankSumAbove(xs, ys []float64, shift float64) (Shift, error) {
	return rankSumAbove(xs, ys, shift, exactLimit)
}

// rankSumAbove is RankSumAbove with the exact limit as a parameter, so
// that the tests can hold the approximation to the exact value.
func rankSumAbove(xs, ys []float64, shift float64, limit int) (Shift, error) {
	if math.IsNaN(shift) || math.IsInf(shift, 0) {
		return Shift{}, fmt.Errorf("rank-sum test: shift %v: need a finite number", shift)
	}
	type obs struct {
		v float64
		x bool
	}
	var pool []obs
	for _, x := range xs {
		if !math.IsNaN(x) {
			pool = append(pool, obs{x - shift, true})
		}
	}
	n := len(pool)
	for _, y := range ys {
		if !math.IsNaN(y) {
			pool = append(pool, obs{y, false})
		}
	}
	m := len(pool) - n
	if n == 0 || m == 0 {
		return Shift{P: 1, Least: 1}, nil
	}
	slices.SortStableFunc(pool, func(a, b obs) int { return cmp.Compare(a.v, b.v) })
	// Tie blocks: their sizes, and how many xs each holds.
	var blocks, inBlock []int
	for i := 0; i < len(pool); {
		j, bx := i, 0
		for ; j < len(pool) && pool[j].v == pool[i].v; j++ {
			if pool[j].x {
				bx++
			}
		}
		blocks, inBlock = append(blocks, j-i), append(inBlock, bx)
		i = j
	}
	if n*m > limit {
		return normalAbove(twoU(blocks, inBlock), twoU(blocks, topFill(blocks, n)), n, m, blocks), nil
	}
	return exactAbove(twoU(blocks, inBlock), n, m, blocks), nil
}

// twoU is 2U for the given number of xs in each tie block: each x lies
// above the ys of the blocks below its own and ties the ys of its own
// (counted 1 instead of ½, so that 2U is an integer).
func twoU(blocks, xsIn []int) int {
	u, ysBelow := 0, 0
	for i, t := range blocks {
		u += xsIn[i]*2*ysBelow + xsIn[i]*(t-xsIn[i])
		ysBelow += t - xsIn[i]
	}
	return u
}

// topFill puts the n xs on the highest values: the order that gives the
// largest U these pooled values allow.
func topFill(blocks []int, n int) []int {
	xsIn := make([]int, len(blocks))
	for i := len(blocks) - 1; i >= 0 && n > 0; i-- {
		xsIn[i] = min(blocks[i], n)
		n -= xsIn[i]
	}
	return xsIn
}

// exactAbove enumerates the permutation distribution of 2U: every way of
// drawing n of the n+m pooled values as the xs is equally likely. The
// state is (xs drawn so far, 2U so far); a tie block of t values of
// which j are drawn adds j·2·(ys below it) + j·(t − j), in C(t, j) ways.
func exactAbove(seen, n, m int, blocks []int) Shift {
	maxU := 2 * n * m
	// Two tables, swapped block by block: allocating one per block cost
	// more than the counting.
	ways, next := make([][]float64, n+1), make([][]float64, n+1)
	for i := range ways {
		ways[i], next[i] = make([]float64, maxU+1), make([]float64, maxU+1)
	}
	ways[0][0] = 1
	before := 0
	for _, t := range blocks {
		for i := range next {
			clear(next[i])
		}
		for i := 0; i <= n; i++ {
			for u, w := range ways[i] {
				if w == 0 {
					continue
				}
				ysBelow := before - i
				if ysBelow < 0 {
					continue
				}
				for j := 0; j <= t && i+j <= n; j++ {
					if t-j > m-ysBelow { // more ys in the block than are left
						continue
					}
					nu := u + j*2*ysBelow + j*(t-j)
					next[i+j][nu] += w * binomial(t, j)
				}
			}
		}
		ways, next = next, ways
		before += t
	}
	var total, above, top float64
	topU := -1
	for u, w := range ways[n] {
		if w == 0 {
			continue
		}
		total += w
		if u >= seen {
			above += w
		}
		if u > topU {
			topU, top = u, w
		}
	}
	return Shift{P: min(1, above/total), Least: top / total}
}

// normalAbove is the large-sample approximation: U against its mean
// nm/2 and its variance corrected for ties, with a continuity
// correction of ½; Least is the same tail at the largest U possible.
func normalAbove(seen, top, n, m int, blocks []int) Shift {
	N, nf, mf := float64(n+m), float64(n), float64(m)
	ties := 0.0
	for _, t := range blocks {
		tf := float64(t)
		ties += tf*tf*tf - tf
	}
	variance := nf * mf / 12 * ((N + 1) - ties/(N*(N-1)))
	if variance <= 0 { // every value tied: nothing to tell apart
		return Shift{P: 1, Least: 1}
	}
	tail := func(twoU int) float64 {
		z := (float64(twoU)/2 - nf*mf/2 - 0.5) / math.Sqrt(variance)
		return min(1, 0.5*math.Erfc(z/math.Sqrt2))
	}
	return Shift{P: tail(seen), Least: tail(top)}
}

// binomial is C(n, k) as a float64.
func binomial(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return math.Round(r)
}

// Significant applies Tarone's modified Bonferroni correction to a
// family of one-sided tests at family-wise level alpha and reports which
// ones reject: the chance that any rejection in the family is a
// difference that is not there is at most alpha, however many tests the
// family holds. Tarone (1990, "A modified Bonferroni method for discrete
// data", Biometrics 46:515–522) divides alpha not by the number of tests
// but by the smallest K such that at most K tests could reach alpha/K at
// all (their Least): a comparison of 3 windows against 3, whose best
// p-value is 1/20, cannot dilute one of 8 against 8. It also returns
// the level each test was held to (alpha/K) and K.
func Significant(tests []Shift, alpha float64) (reject []bool, level float64, k int, err error) {
	if !(alpha > 0 && alpha < 1) {
		return nil, 0, 0, fmt.Errorf("multiple-comparison correction: level %v: need a number between 0 and 1", alpha)
	}
	for k = 1; ; k++ {
		level = alpha / float64(k)
		testable := 0
		for _, t := range tests {
			if t.Least <= level {
				testable++
			}
		}
		if testable <= k {
			break
		}
	}
	reject = make([]bool, len(tests))
	for i, t := range tests {
		reject[i] = t.P <= level
	}
	return reject, level, k, nil
}

// SamplesToSeparate is the fewest samples a side (fault windows,
// injections, independent trials) with which a rank-sum comparison could
// reject at level alpha/k at all: the smallest n with 1/C(2n, n) ≤
// alpha/k, the p-value of a complete separation without ties. Fewer can
// never set two backends apart, whatever the numbers; as many is
// necessary, not sufficient (the separation must still be seen). It
// returns 0 for a level outside (0, 1) or k < 1.
func SamplesToSeparate(alpha float64, k int) int {
	if !(alpha > 0 && alpha < 1) || k < 1 {
		return 0
	}
	for n := 1; ; n++ {
		if 1/binomial(2*n, n) <= alpha/float64(k) {
			return n
		}
	}
}
