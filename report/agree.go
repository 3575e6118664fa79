package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/results"
)

// Agreement is whether two runs' answers agree on one intent.
type Agreement struct {
	Intent string
	// A and B are the two runs' choices (nil when a run has no answer for
	// the intent).
	A, B *results.Choice
	// Agree is set when both picked the same (the same single pick, or
	// the same tie) with the same runner-up and the same decided; InTie
	// when they differ only inside a tie both named (each one's first
	// pick is among the other's tied candidates, and neither decided).
	Agree, InTie bool
	// Differences say where they do not agree: the pick, the runner-up,
	// decided, and each separation one run made and the other did not.
	Differences []string
}

// Agree compares the answers of two runs (results.File.Answer), intent
// by intent: do they agree on the pick, the runner-up and whether it is
// decided, and where not, which separation one of them made that the
// other did not. A run without an answer agrees with nothing.
func Agree(a, b *results.File) []Agreement {
	var out []Agreement
	for _, intent := range []string{results.IntentCorrectness, results.IntentEfficiency} {
		x, y := choiceOf(a, intent), choiceOf(b, intent)
		if x == nil && y == nil {
			continue
		}
		g := Agreement{Intent: intent, A: x, B: y}
		switch {
		case x == nil || y == nil:
			g.Differences = append(g.Differences, "only one run answers for "+intent)
		default:
			g.compare()
		}
		out = append(out, g)
	}
	return out
}

// choiceOf is f's answer for intent, or nil.
func choiceOf(f *results.File, intent string) *results.Choice {
	if f == nil || f.Answer == nil {
		return nil
	}
	if intent == results.IntentCorrectness {
		return f.Answer.Correctness
	}
	return f.Answer.Efficiency
}

func (g *Agreement) compare() {
	x, y := g.A, g.B
	if !slices.Equal(sortedCopy(x.Pick), sortedCopy(y.Pick)) {
		g.Differences = append(g.Differences, fmt.Sprintf("pick: %s against %s", pickWords(x), pickWords(y)))
	}
	if x.RunnerUp != y.RunnerUp {
		g.Differences = append(g.Differences, fmt.Sprintf("runner-up: %s against %s", orUnset(x.RunnerUp, "none"), orUnset(y.RunnerUp, "none")))
	}
	if x.Decided != y.Decided {
		g.Differences = append(g.Differences, fmt.Sprintf("decided: %v against %v", x.Decided, y.Decided))
	}
	for _, s := range x.Separations {
		if !slices.ContainsFunc(y.Separations, s.SameAs) {
			g.Differences = append(g.Differences, "only the first run set apart "+sepText(s))
		}
	}
	for _, s := range y.Separations {
		if !slices.ContainsFunc(x.Separations, s.SameAs) {
			g.Differences = append(g.Differences, "only the second run set apart "+sepText(s))
		}
	}
	g.Agree = len(g.Differences) == 0
	g.InTie = !g.Agree && !x.Decided && !y.Decided && len(x.Pick) > 0 && len(y.Pick) > 0 &&
		slices.Contains(y.Pick, x.Pick[0]) && slices.Contains(x.Pick, y.Pick[0])
}

// sortedCopy is s sorted, s untouched.
func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// pickWords is "redis", "a tie of redis and etcd" or "none".
func pickWords(c *results.Choice) string {
	switch len(c.Pick) {
	case 0:
		return "none"
	case 1:
		return c.Pick[0]
	}
	return "a tie of " + joinAnd(c.Pick)
}

// sepText is "table from redis on speed (p = 0.0001, level 0.001)".
func sepText(s results.Separation) string {
	on := s.Measure
	if s.Class != "" {
		on += " under " + s.Class
	}
	return fmt.Sprintf("%s from %s on %s (p = %s, level %s)", s.Loser, s.Winner, on, fmtP(s.P), fmtP(s.Level))
}

// AgreeText writes whether two runs' answers agree, intent by intent, and
// reports whether all of them do (or differ only inside named ties).
func AgreeText(w io.Writer, a, b *results.File) (bool, error) {
	var sb strings.Builder
	all := true
	gs := Agree(a, b)
	if len(gs) == 0 {
		sb.WriteString("answers: neither run holds an answer (results.json without answer): nothing to compare\n")
		all = false
	}
	for _, g := range gs {
		switch {
		case g.Agree:
			fmt.Fprintf(&sb, "%s: the answers agree: %s (decided %v)\n", g.Intent, pickWords(g.A), g.A.Decided)
		case g.InTie:
			fmt.Fprintf(&sb, "%s: the answers differ only inside a tie both name\n", g.Intent)
		default:
			all = false
			fmt.Fprintf(&sb, "%s: the answers differ\n", g.Intent)
		}
		for _, d := range g.Differences {
			fmt.Fprintf(&sb, "  - %s\n", d)
		}
	}
	_, err := io.WriteString(w, sb.String())
	return all, err
}
