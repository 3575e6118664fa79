package answer

import (
	"math"
	"sync"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// maxPlanned caps the samples a side a need asks for: past it a
// difference at the margin is not what keeps two locks apart.
const maxPlanned = 200

// needs returns, for the leader against each candidate still tied with
// it, the evidence that would settle their comparison at level (the
// next look's share of alpha for one of k comparisons) if they differ by
// the practical margin, on each ranking measure where more samples can
// separate them. These comparisons are the ones that can change the
// answer; the rounds of lockbench advise run exactly them.
//
// The answer is decided only when the leader beats every one of the m
// others, so each comparison is planned at power Power^(1/m): planned
// at Power each, the answer was decided far less often than Power
// (see docs/measurements.md).
func needs(left []*backend, intent string, level float64) []results.Need {
	if len(left) < 2 {
		return nil
	}
	lead := left[0]
	power := math.Pow(Power, 1/float64(len(left)-1))
	var out []results.Need
	for _, c := range left[1:] {
		out = append(out, need(lead, c, intent, level, power)...)
	}
	return out
}

// need is what would settle a against b with probability power, on each
// measure of the intent's steps where more samples can.
func need(a, b *backend, intent string, level, power float64) []results.Need {
	var out []results.Need
	for _, m := range steps(intent) {
		switch m {
		case results.MeasureLockBugs:
			// The class where their rates differ most: the one whose
			// comparison can separate with the fewest injections.
			var best *classEvidence
			bestGap := 0.0
			for _, k := range commonClasses(a, b) {
				x, y := a.classes[k], b.classes[k]
				if x.tested == 0 || y.tested == 0 {
					continue
				}
				if gap := math.Abs(x.bugRate().Observed() - y.bugRate().Observed()); gap > bestGap {
					best, bestGap = x, gap
				}
			}
			if best == nil {
				continue
			}
			lo := min(a.classes[best.class+"|"+best.profile].bugRate().Observed(), b.classes[best.class+"|"+best.profile].bugRate().Observed())
			n := injectionsFor(lo, min(1, lo+lockBugMargin), level, power)
			out = append(out, results.Need{A: a.name, B: b.name, Measure: m, Class: best.label(), Injections: n})
		case results.MeasureAvailability:
			// Only a difference past the margin can separate (the margin is
			// in the hypothesis): plan for a class where one shows.
			for _, k := range commonClasses(a, b) {
				x, y := a.classes[k], b.classes[k]
				gap := math.Abs(stats.SpreadOf(x.share).Median - stats.SpreadOf(y.share).Median)
				if len(x.share) == 0 || len(y.share) == 0 || gap <= shareMargin {
					continue
				}
				sd := math.Max(upperSD(x.share, y.share), 0.05)
				n := normalN(gap-shareMargin, sd, level, power)
				out = append(out, results.Need{A: a.name, B: b.name, Measure: m, Class: x.label(), Injections: n})
				break
			}
		case results.MeasureSpeed:
			out = append(out, results.Need{A: a.name, B: b.name, Measure: m, Trials: speedTrials(a, b, level, power)})
		}
	}
	return out
}

// injectionsFor is the fewest tested injections a side with which
// Fisher's exact test, one-sided at level, separates a rate lo from a
// rate hi with probability power (exact, over both binomials).
// The power is taken as growing with n (bisection); results are
// remembered, since every look of every round asks again.
func injectionsFor(lo, hi, level, power float64) int {
	// The level rounded down to 2 significant digits: a few more samples
	// than needed, never fewer, and the answers can be remembered.
	digits := math.Pow(10, math.Floor(math.Log10(level))-1)
	// The rates to a tenth: planning needs no finer.
	// The power to a hundredth, rounded up.
	key := [4]float64{math.Round(lo*10) / 10, math.Round(hi*10) / 10, math.Floor(level/digits) * digits, math.Ceil(power*100) / 100}
	level, power = key[2], key[3]
	if n, ok := planned.Load(key); ok {
		return n.(int)
	}
	a, b := 2, maxPlanned
	if fisherPower(b, key[0], key[1], level) < power {
		planned.Store(key, maxPlanned)
		return maxPlanned
	}
	for a < b {
		m := (a + b) / 2
		if fisherPower(m, key[0], key[1], level) >= power {
			b = m
		} else {
			a = m + 1
		}
	}
	planned.Store(key, a)
	return a
}

// planned remembers injectionsFor's answers.
var planned sync.Map

// fisherPower is the chance that k1 ~ Bin(n, hi) against k0 ~ Bin(n, lo)
// separates at level.
func fisherPower(n int, lo, hi, level float64) float64 {
	p0, p1 := binomialPMF(n, lo), binomialPMF(n, hi)
	power := 0.0
	for k1 := 0; k1 <= n; k1++ {
		for k0 := 0; k0 <= n; k0++ {
			if w := p0[k0] * p1[k1]; w >= 1e-12 && fisherAbove(k1, k0, n) <= level {
				power += w
			}
		}
	}
	return power
}

// fisherAbove is Fisher's exact one-sided p-value of k1 events in n
// trials against k0 in n (see fisherTail).
func fisherAbove(k1, k0, n int) float64 { return fisherTail(k1, n, k0, n) }

// fisherTail is Fisher's exact one-sided p-value of k1 events in n1
// trials against k0 in n0: P(X ≥ k1) for X hypergeometric, n1 drawn from
// n1+n0 holding k1+k0 events. It is what the rank-sum test gives on 0/1
// samples, without building them.
func fisherTail(k1, n1, k0, n0 int) float64 {
	total, events := n1+n0, k1+k0
	p := 0.0
	for x := k1; x <= min(n1, events); x++ {
		p += math.Exp(lchoose(events, x) + lchoose(total-events, n1-x) - lchoose(total, n1))
	}
	return min(p, 1)
}

// fisherShift is Fisher's exact test of worse's rate above better's as a
// stats.Shift: the p-value and the smallest p-value the margins allow
// (all the events on worse's side, as many as it can hold), for Tarone's
// correction.
func fisherShift(worse, better stats.Rate) stats.Shift {
	k1, n1, k0, n0 := int(min(worse.K, worse.N)), int(worse.N), int(min(better.K, better.N)), int(better.N)
	if n1 == 0 || n0 == 0 {
		return stats.Shift{P: 1, Least: 1}
	}
	return stats.Shift{P: fisherTail(k1, n1, k0, n0), Least: fisherTail(min(n1, k1+k0), n1, max(k1+k0-n1, 0), n0)}
}

// binomialPMF is P(K = k) for k in 0..n, K ~ Bin(n, p).
func binomialPMF(n int, p float64) []float64 {
	out := make([]float64, n+1)
	for k := range out {
		lg := lchoose(n, k)
		switch {
		case p == 0:
			if k == 0 {
				out[k] = 1
			}
		case p == 1:
			if k == n {
				out[k] = 1
			}
		default:
			out[k] = math.Exp(lg + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
		}
	}
	return out
}

// lchoose is log C(n, k), from a table for the counts planning meets.
func lchoose(n, k int) float64 {
	if n < len(logFact) {
		return logFact[n] - logFact[k] - logFact[n-k]
	}
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// logFact holds log n! for n up to twice maxPlanned.
var logFact = func() []float64 {
	t := make([]float64, 2*maxPlanned+1)
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] + math.Log(float64(i))
	}
	return t
}()

// normalN is the samples a side with which a one-sided test at level
// finds a difference delta between two means of spread sd with
// probability power (the normal approximation, plus one for the
// t-distribution's heavier tails).
func normalN(delta, sd, level, power float64) int {
	if !(delta > 0) {
		return maxPlanned
	}
	z := zAbove(level) + zAbove(1-power)
	n := int(math.Ceil(2*z*z*sd*sd/(delta*delta))) + 1
	return min(max(n, 2), maxPlanned)
}

// zAbove is the standard normal quantile with p above it.
func zAbove(p float64) float64 { return math.Sqrt2 * math.Erfinv(1-2*p) }
