package stats

import (
	"cmp"
	"fmt"
	"slices"
)

// StepDown applies Tarone's correction step-down, as Holm's procedure
// applies Bonferroni's: the smallest p-value is held to alpha/K of the
// whole family (K as in Significant); when it rejects, the next smallest
// is held to alpha/K of the tests not yet rejected, and so on, until one
// does not reject. The family-wise level stays alpha — it is the closed
// test of Tarone's (Hommel and Krummenauer 1998, "Improvements and
// modifications of Tarone's multiple test procedure for discrete data",
// Biometrics 54:673–681), valid because K never grows when tests leave
// the family — and a family with real differences in it loses less to
// them: each difference found relaxes the level of the rest.
//
// It returns which tests reject and, for each, the level it was held
// to: a rejected test's level at its step, a test left standing the
// level of the step that stopped (what it would have had to reach), and
// that step's K.
func StepDown(tests []Shift, alpha float64) (reject []bool, levels []float64, k int, err error) {
	if !(alpha > 0 && alpha < 1) {
		return nil, nil, 0, fmt.Errorf("multiple-comparison correction: level %v: need a number between 0 and 1", alpha)
	}
	order := make([]int, len(tests))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(tests[a].P, tests[b].P) })
	reject, levels = make([]bool, len(tests)), make([]float64, len(tests))
	left := make([]Shift, 0, len(tests))
	for step, i := range order {
		// The family at this step: the tests not rejected yet.
		left = left[:0]
		for _, j := range order[step:] {
			left = append(left, tests[j])
		}
		var level float64
		_, level, k, _ = Significant(left, alpha)
		if !(tests[i].P <= level) {
			for _, j := range order[step:] {
				levels[j] = level
			}
			return reject, levels, k, nil
		}
		reject[i], levels[i] = true, level
	}
	return reject, levels, 1, nil
}
