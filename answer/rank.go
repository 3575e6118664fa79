package answer

import (
	"cmp"
	"math"
	"slices"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// The practical margins: the differences the procedure is built to find
// (the indifference zone). The rounds plan samples so that a difference
// of this size separates with probability Power at the family's level;
// availability's margins are also part of its tested hypothesis (a
// difference a user would not notice never outranks speed).
const (
	// lockBugMargin is a difference in the share of tested injections of
	// a class followed by a lock bug.
	lockBugMargin = 0.5
	// shareMargin is a difference in the in-fault grants as a share of
	// the baseline; recoveryMargin in seconds to recover.
	shareMargin    = 0.10
	recoveryMargin = 1.0
	// speedMargin is a ratio of throughputs: 1.25 is 25% faster.
	speedMargin = 1.25
	// Power is the chance the planned samples give a difference at the
	// margin of separating.
	Power = 0.8
	// speedSpread is the spread (standard deviation of the logarithm)
	// assumed for a lock's throughput over fresh servers until two
	// trials a side measure it.
	speedSpread = 0.2
)

// hypothesis is one one-sided comparison of the family: that better
// beats worse on a measure (under a class, for lock bugs).
type hypothesis struct {
	better, worse *backend
	measure       string
	// sub is "share" or "recovery" for availability.
	sub   string
	class string
	test  stats.Shift
	// level is what the step-down procedure held test.P to.
	level float64
}

// family is the comparisons of one answer at one look, and which of them
// the test rejects.
type family struct {
	hs     []hypothesis
	reject []bool
	// counted is the number of comparisons Tarone's correction counted
	// in the whole family; k is the number it counted among those left
	// standing when the step-down procedure stopped, whose level,
	// alpha/k, the undecided comparisons still have to reach.
	counted, k int
}

// steps are the measures that rank, in order, for an intent: lock bugs
// (efficiency only: correctness qualifiers have none), availability,
// speed. Expired holders are the lease working: reported, never ranked.
func steps(intent string) []string {
	if intent == results.IntentEfficiency {
		return []string{results.MeasureLockBugs, results.MeasureAvailability, results.MeasureSpeed}
	}
	return []string{results.MeasureAvailability, results.MeasureSpeed}
}

// build forms the family among the qualifiers: every pair, both
// directions, on every ranking measure — lock bugs, the in-fault share
// and the recovery, each per class both faced (a lock that stops under
// one fault is not rescued by the classes where it does not), and speed
// from independent trials — and tests it at level alpha with Tarone's
// correction applied step-down (stats.StepDown). A class only one of the
// two faced enters no comparison of theirs (and is said so), and never
// leaves anyone else's.
func build(tier []*backend, intent string, alpha float64) *family {
	fam := &family{}
	ranked := steps(intent)
	for i, a := range tier {
		for _, b := range tier[i+1:] {
			for _, dir := range [][2]*backend{{a, b}, {b, a}} {
				fam.hs = append(fam.hs, pair(dir[0], dir[1], ranked)...)
			}
		}
	}
	tests := make([]stats.Shift, len(fam.hs))
	for i, h := range fam.hs {
		tests[i] = h.test
	}
	var levels []float64
	fam.reject, levels, fam.k, _ = stats.StepDown(tests, alpha)
	_, _, fam.counted, _ = stats.Significant(tests, alpha)
	for i := range fam.hs {
		fam.hs[i].level = levels[i]
	}
	return fam
}

// pair returns the one-sided comparisons of better against worse.
func pair(better, worse *backend, ranked []string) []hypothesis {
	var hs []hypothesis
	add := func(h hypothesis, t stats.Shift, err error) {
		if err != nil { // shifts are constants: cannot happen
			t = stats.Shift{P: 1, Least: 1}
		}
		h.better, h.worse, h.test = better, worse, t
		hs = append(hs, h)
	}
	common := commonClasses(better, worse)
	if slices.Contains(ranked, results.MeasureLockBugs) {
		for _, k := range common {
			x, y := better.classes[k], worse.classes[k]
			if x.tested == 0 || y.tested == 0 {
				continue
			}
			add(hypothesis{measure: results.MeasureLockBugs, class: x.label()}, fisherShift(y.bugRate(), x.bugRate()), nil)
		}
	}
	for _, k := range common {
		x, y := better.classes[k], worse.classes[k]
		if len(x.share) > 0 && len(y.share) > 0 {
			t, err := stats.RankSumAbove(x.share, y.share, shareMargin)
			add(hypothesis{measure: results.MeasureAvailability, sub: "share", class: x.label()}, t, err)
		}
		if len(x.recovery) > 0 && len(y.recovery) > 0 {
			t, err := stats.RankSumAbove(y.recovery, x.recovery, recoveryMargin)
			add(hypothesis{measure: results.MeasureAvailability, sub: "recovery", class: x.label()}, t, err)
		}
	}
	if better.independent && worse.independent && len(better.speeds) >= 2 && len(worse.speeds) >= 2 {
		t, err := speedTest(better.speeds, worse.speeds)
		add(hypothesis{measure: results.MeasureSpeed}, t, err)
	}
	return hs
}

// speedTest is the one-sided test of xs faster than ys, each a
// throughput per independent trial: Welch's t on log throughput, or,
// when a trial granted nothing (its log is −∞), the exact rank-sum test
// on the throughputs, where that trial is the slowest of its sample. The
// logarithm would drop it, and a lock that stalled a whole trial would
// compare as if it never had.
func speedTest(xs, ys []float64) (stats.Shift, error) {
	if slices.ContainsFunc(xs, notPositive) || slices.ContainsFunc(ys, notPositive) {
		return stats.RankSumAbove(xs, ys, 0)
	}
	return stats.WelchAbove(logs(xs), logs(ys), 0)
}

// notPositive reports a throughput that has no logarithm.
func notPositive(x float64) bool { return !(x > 0) }

// commonClasses returns the keys of the classes (and profiles) both
// backends faced with tested injections or availability samples.
func commonClasses(a, b *backend) []string {
	var out []string
	for k, x := range a.classes {
		y := b.classes[k]
		if y == nil {
			continue
		}
		if (x.tested > 0 && y.tested > 0) || (len(x.share) > 0 && len(y.share) > 0) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ones turns k in n into n samples of 0 or 1: on them the rank-sum test
// is Fisher's exact test.
func ones(r stats.Rate) []float64 {
	out := make([]float64, r.N)
	for i := range min(r.K, r.N) {
		out[i] = 1
	}
	return out
}

// logs returns the natural logarithms of the positive values of xs.
func logs(xs []float64) []float64 {
	var out []float64
	for _, x := range xs {
		if x > 0 {
			out = append(out, math.Log(x))
		}
	}
	return out
}

// beats returns the first rejected comparison in which a beats b on a
// measure, or nil.
func (f *family) beats(measure string, a, b *backend) *hypothesis {
	for i, h := range f.hs {
		if f.reject[i] && h.measure == measure && h.better == a && h.worse == b {
			return &f.hs[i]
		}
	}
	return nil
}

// separation is a candidate set apart at a step, by whom.
type separation struct {
	loser *backend
	by    *hypothesis
	step  int
}

// rank applies the steps in order to the tier: at each, a candidate
// drops out when another still in beats it on that measure and it beats
// that one on none (when that would drop everyone, nobody drops). It
// returns the candidates left, best first (the team's own servers, then
// speed, then fewer nodes, then name), and those set apart.
func rank(fam *family, tier []*backend, intent string, have []string) ([]*backend, []separation) {
	var out []separation
	left := slices.Clone(tier)
	for i, m := range steps(intent) {
		var keep []*backend
		var drop []separation
		for _, c := range left {
			var by *hypothesis
			for _, a := range left {
				if a == c {
					continue
				}
				if h := fam.beats(m, a, c); h != nil && fam.beats(m, c, a) == nil {
					by = h
					break
				}
			}
			if by != nil {
				drop = append(drop, separation{loser: c, by: by, step: i})
			} else {
				keep = append(keep, c)
			}
		}
		if len(keep) > 0 {
			left, out = keep, append(out, drop...)
		}
	}
	order(left, have)
	return left, out
}

// order sorts candidates best first where the evidence cannot: the
// servers the team runs first, then by median speed, then fewer nodes,
// then name.
func order(bs []*backend, have []string) {
	slices.SortStableFunc(bs, func(a, b *backend) int {
		return cmp.Or(cmp.Compare(owned(b, have), owned(a, have)), cmp.Compare(b.median(), a.median()),
			cmp.Compare(a.nodes, b.nodes), cmp.Compare(a.name, b.name))
	})
}

// owned is 1 when the team runs the backend's servers (or says nothing
// of what it runs), else 0.
func owned(b *backend, have []string) int {
	if len(have) == 0 || slices.Contains(have, b.kind) {
		return 1
	}
	return 0
}
