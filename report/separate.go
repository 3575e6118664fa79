package report

import (
	"fmt"
	"math"

	"github.com/lockbench/lockbench/stats"
)

// familyLevel is the family-wise error rate of one answer's ranking:
// the chance that any backend is set apart, on safety, availability or
// speed, by a difference that is not there. Every comparison the ranking
// makes belongs to one family tested at this level (see separation).
const familyLevel = 0.05

// The steps of rule 5 that a test can decide.
const (
	stepSafety       = "safety"
	stepAvailability = "availability"
	stepSpeed        = "speed"
)

// comparison is one one-sided hypothesis of the ranking: that better
// beats worse on one measure under one class (and profile, for safety),
// with the rank-sum test's verdict on the samples of both.
type comparison struct {
	step, measure  string
	better, worse  string
	class, profile string
	// n and m are the samples of better and worse: injections, fault
	// windows, independent trials.
	n, m int
	test stats.Shift
}

// separation is the family of every comparison one answer's ranking
// makes — each ordered pair of qualifiers, on safety per compared class
// and profile (efficiency only), on the in-fault share and the recovery
// per compared class, and on speed when both sides have independent
// trials — and which of them the test rejects at familyLevel, Tarone's
// correction applied step-down to the whole family (stats.StepDown), as
// the answer's own family is. A step sets a backend apart
// only through a rejected comparison, so the whole ranking errs with
// probability at most familyLevel, however many backends and classes
// it compares: with 3 windows a side the best p-value is 1/20 and
// nothing is set apart, which is what 3 windows can show.
type separation struct {
	comparisons []comparison
	rejected    []bool
	// levels are what each comparison's p-value was held to; level is
	// the one the comparisons left standing still have to reach, k the
	// number of comparisons Tarone's correction counted among them when
	// the step-down stopped, sized the comparisons with samples on both
	// sides.
	levels    []float64
	level     float64
	k, sized  int
	minWindow int // fewest fault windows a side among the availability comparisons
	maxWindow int
}

// separate builds and tests the family for the qualifying backends of
// one question on the classes they all faced.
func (ds *dataset) separate(tier, classes []string, peaks map[string]*group, q question) *separation {
	s := &separation{}
	// add tests c on the samples of its better and worse backend: that
	// better's lie above worse's by more than shift or, when lower is
	// better (incidents, recovery times), below them.
	add := func(c comparison, better, worse []float64, shift float64, lowerIsBetter bool) {
		xs, ys := better, worse
		if lowerIsBetter {
			xs, ys = worse, better
		}
		t, err := stats.RankSumAbove(xs, ys, shift)
		if err != nil { // the shifts are constants: cannot happen
			t = stats.Shift{P: 1, Least: 1}
		}
		c.n, c.m, c.test = finite(better), finite(worse), t
		s.comparisons = append(s.comparisons, c)
	}
	// Each backend's samples per class (and its incidents per class and
	// profile), gathered once for all the pairs it is in.
	samples := map[string]map[string]group{}
	incidents := map[[3]string]bound{}
	for _, b := range tier {
		samples[b] = map[string]group{}
		for _, cls := range classes {
			samples[b][cls] = totals(ds.find(query{Backend: b, Class: cls}))
			for _, d := range ds.Durabilities {
				incidents[[3]string{b, cls, d}] = rateOf(totals(ds.find(query{Backend: b, Class: cls, Durability: d})), kindIncident, cls)
			}
		}
	}
	for _, a := range tier {
		for _, b := range tier {
			if a == b {
				continue
			}
			for _, cls := range classes {
				if q == forEfficiency {
					for _, d := range ds.Durabilities {
						x, y := incidents[[3]string{b, cls, d}], incidents[[3]string{a, cls, d}]
						if x.Known() && y.Known() {
							add(comparison{step: stepSafety, measure: "double-grant incidents",
								better: a, worse: b, class: cls, profile: d},
								injections(y.Rate), injections(x.Rate), 0, true)
						}
					}
				}
				ga, gb := samples[a][cls], samples[b][cls]
				add(comparison{step: stepAvailability, measure: "in-fault share",
					better: a, worse: b, class: cls}, ga.InFault, gb.InFault, shareMargin, false)
				add(comparison{step: stepAvailability, measure: "recovery",
					better: a, worse: b, class: cls}, ga.Recovery, gb.Recovery, recoveryMargin, true)
			}
			if pa, pb := peaks[a], peaks[b]; pa != nil && pb != nil && pa.Independent && pb.Independent {
				add(comparison{step: stepSpeed, measure: "grants/s", better: a, worse: b}, pa.speeds, pb.speeds, 0, false)
			}
		}
	}
	tests := make([]stats.Shift, len(s.comparisons))
	s.minWindow = math.MaxInt
	for i, c := range s.comparisons {
		tests[i] = c.test
		if c.n > 0 && c.m > 0 {
			s.sized++
		}
		if c.step == stepAvailability && c.measure == "in-fault share" && c.n > 0 && c.m > 0 {
			s.minWindow, s.maxWindow = min(s.minWindow, c.n, c.m), max(s.maxWindow, c.n, c.m)
		}
	}
	if s.minWindow == math.MaxInt {
		s.minWindow = 0
	}
	s.rejected, s.levels, s.k, _ = stats.StepDown(tests, familyLevel)
	s.level = familyLevel / float64(max(s.k, 1))
	for i, r := range s.rejected {
		if !r {
			s.level = s.levels[i]
			break
		}
	}
	return s
}

// finite counts the samples a test uses: all but NaNs.
func finite(xs []float64) int {
	n := 0
	for _, x := range xs {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}

// injections turns k events in n injections into n samples of 0 or 1:
// on them the rank-sum test is Fisher's exact test.
func injections(r stats.Rate) []float64 {
	out := make([]float64, r.N)
	for i := range min(r.K, r.N) {
		out[i] = 1
	}
	return out
}

// beats returns the first rejected comparison of step in which a beats
// b, or nil.
func (s *separation) beats(step, a, b string) *comparison {
	for i, c := range s.comparisons {
		if s.rejected[i] && c.step == step && c.better == a && c.worse == b {
			return &s.comparisons[i]
		}
	}
	return nil
}

// setApart applies one step: it drops the backends another one of tier
// beats under that step and loses to under none, with the comparison
// that did it. When that would drop every backend (no clear order) it
// drops none.
func (s *separation) setApart(step string, tier []string) ([]string, map[string]*comparison) {
	by := map[string]*comparison{}
	var keep []string
	for _, b := range tier {
		for _, a := range tier {
			if a == b {
				continue
			}
			if c := s.beats(step, a, b); c != nil && s.beats(step, b, a) == nil {
				by[b] = c
				break
			}
		}
		if by[b] == nil {
			keep = append(keep, b)
		}
	}
	if len(keep) == 0 {
		return tier, nil
	}
	return keep, by
}

// testWords says what the test found for c: its p-value against the
// level the step-down procedure held it to.
func (s *separation) testWords(c *comparison) string {
	level := s.level
	if i := s.index(c); i >= 0 {
		level = s.levels[i]
	}
	return fmt.Sprintf("rank-sum p = %s on %d against %d, held to %s, step-down over this answer's %d comparisons (%.0f%% for all "+
		"together)",
		fmtP(c.test.P), c.n, c.m, fmtP(level), len(s.comparisons), familyLevel*100)
}

// index returns the position of c in the family, or -1.
func (s *separation) index(c *comparison) int {
	for i := range s.comparisons {
		if &s.comparisons[i] == c {
			return i
		}
	}
	return -1
}

// settle says how many samples a side the test needs before it could
// set two backends apart at this family's level: fewer can never do it.
func (s *separation) settle() int {
	return stats.SamplesToSeparate(familyLevel, max(1, s.sized))
}

// fmtP is a p-value in 2 significant digits.
func fmtP(p float64) string {
	if p >= 1e-4 {
		return fmt.Sprintf("%.2g", p)
	}
	return fmt.Sprintf("%.1e", p)
}
