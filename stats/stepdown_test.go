package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestStepDown(t *testing.T) {
	c := func(p float64) Shift { return Shift{P: p} }
	three := Shift{P: 0.05, Least: 0.05} // 3 against 3, fully separated: untestable below 0.05
	for _, tt := range []struct {
		name   string
		tests  []Shift
		reject []bool
		levels []float64
	}{
		// Single-step Tarone holds all three to 0.05/3 and rejects only
		// the first; step-down frees 0.025, then 0.05.
		{"each rejection frees the rest", []Shift{c(0.04), c(0.01), c(0.02)}, []bool{true, true, true}, []float64{0.05, 0.05 / 3, 0.025}},
		{"stops at the first that stands", []Shift{c(0.01), c(0.3), c(0.02)}, []bool{true, false, true}, []float64{0.05 / 3, 0.05, 0.025}},
		{"none", []Shift{c(0.03), c(0.04)}, []bool{false, false}, []float64{0.025, 0.025}},
		// The untestable do not dilute the clear one (Tarone), and stay.
		{"untestable", append(repeat(three, 10), c(0.001)), append(make([]bool, 10), true), append(fill(0.05/2, 10), 0.05/2)},
		{"empty", nil, []bool{}, []float64{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rej, levels, _, err := StepDown(tt.tests, 0.05)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.tests {
				if rej[i] != tt.reject[i] || math.Abs(levels[i]-tt.levels[i]) > 1e-12 {
					t.Fatalf("rejected %v at levels %v, want %v at %v", rej, levels, tt.reject, tt.levels)
				}
			}
		})
	}
	for _, alpha := range []float64{0, 1, math.NaN()} {
		if _, _, _, err := StepDown(nil, alpha); err == nil {
			t.Errorf("level %v accepted", alpha)
		}
	}
}

// TestStepDownErrorAndPower: over 4,000 simulated families of Welch
// tests (10 comparisons with no difference, 10 with one of a spread, 5
// against 5 samples) mixed with exact rank-sum tests that cannot all be
// counted (10 of 3 against 3, no difference), the step-down procedure
// rejects a comparison with no difference in at most alpha of the
// families, and finds more of the real differences than single-step
// Tarone does on the same families.
func TestStepDownErrorAndPower(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 4))
	draw := func(n int, mu float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = mu + r.NormFloat64()
		}
		return xs
	}
	const families, alpha = 4000, 0.05
	falseFamilies, found, foundSingle := 0, 0, 0
	for range families {
		var tests []Shift
		var null []bool
		for i := range 30 {
			var s Shift
			var err error
			switch {
			case i < 10:
				s, err = WelchAbove(draw(5, 0), draw(5, 0), 0)
			case i < 20:
				s, err = WelchAbove(draw(5, 2.5), draw(5, 0), 0)
			default:
				s, err = RankSumAbove(draw(3, 0), draw(3, 0), 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			tests, null = append(tests, s), append(null, i < 10 || i >= 20)
		}
		rej, _, _, err := StepDown(tests, alpha)
		if err != nil {
			t.Fatal(err)
		}
		single, _, _, _ := Significant(tests, alpha)
		wrong := false
		for i := range tests {
			if single[i] && !rej[i] {
				t.Fatalf("single-step rejects test %d and step-down does not", i)
			}
			switch {
			case null[i] && rej[i]:
				wrong = true
			case !null[i] && rej[i]:
				found++
			}
			if !null[i] && single[i] {
				foundSingle++
			}
		}
		if wrong {
			falseFamilies++
		}
	}
	fwer := float64(falseFamilies) / families
	t.Logf("family-wise error %.2f%% (alpha 5%%); real differences found: step-down %.1f%%, single-step %.1f%%",
		fwer*100, float64(found)/families/10*100, float64(foundSingle)/families/10*100)
	if fwer > alpha+0.01 {
		t.Errorf("family-wise error %.2f%%, want at most %.0f%%", fwer*100, alpha*100)
	}
	if found <= foundSingle {
		t.Errorf("step-down found %d real differences, single-step %d: want more", found, foundSingle)
	}
}

func fill(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}
