package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockbench/lockbench/results"
)

// decisionBoxes renders the decided answer of a run (results.File.Answer,
// written by package answer): one box per intent, its first reason as
// the answer and the rest — reasons, separations, what would settle a
// tie, bounds, what was not tested — as the evidence. The report renders
// the decision; it never makes it.
func decisionBoxes(a *results.Answer) []answerBox {
	var out []answerBox
	for _, ch := range []*results.Choice{a.Correctness, a.Efficiency} {
		if ch == nil {
			continue
		}
		title := "For efficiency — a rare double grant is tolerable"
		if ch.Intent == results.IntentCorrectness {
			title = "For correctness — a double grant corrupts data"
		}
		lines := choiceLines(a, ch)
		out = append(out, answerBox{title: title, answer: lines[0], evidence: lines[1:]})
	}
	return out
}

// choiceLines words one intent's choice, the answer first.
func choiceLines(a *results.Answer, ch *results.Choice) []string {
	var lines []string
	lines = append(lines, ch.Reasons...)
	if len(lines) == 0 {
		lines = append(lines, "No answer: the decision gave no reason.")
	}
	if ch.RunnerUp != "" {
		lines = append(lines, "Runner-up: "+ch.RunnerUp+".")
	}
	lines = append(lines, judgeLines(ch.Needs)...)
	for _, n := range ch.Needs {
		if n.Measure == results.MeasureJudged {
			continue
		}
		what := fmt.Sprintf("%d tested injections of %s a side", n.Injections, n.Class)
		if n.Trials > 0 {
			what = fmt.Sprintf("%d independent trials a side on fresh servers", n.Trials)
		}
		lines = append(lines, fmt.Sprintf("Would settle %s against %s on %s: %s.", n.A, n.B, n.Measure, what))
	}
	if len(ch.Bounds) > 0 {
		lines = append(lines, "Bounds: "+strings.Join(ch.Bounds, "; ")+".")
	}
	if len(ch.NotTested) > 0 {
		lines = append(lines, "Not tested for this pick: "+strings.Join(ch.NotTested, "; ")+".")
	}
	for _, u := range ch.Unqualified {
		prefix := "Out: "
		if _, reason, _ := strings.Cut(u, ": "); strings.HasPrefix(reason, "not judged") {
			prefix = "Not judged yet: "
		}
		lines = append(lines, prefix+u+".")
	}
	if n := len(a.Looks); n > 0 {
		l := a.Looks[n-1]
		lines = append(lines, fmt.Sprintf("Look %d of this run: %s of the %s family-wise level spent so far.", l.N, fmtP(l.Spent), fmtP(a.Alpha)))
	}
	return lines
}

// judgeLines says, one line a candidate, what would judge each candidate
// not judged yet: the tested injections of each fault its needs name.
func judgeLines(needs []results.Need) []string {
	var order []string
	by := map[string][]results.Need{}
	for _, n := range needs {
		if n.Measure != results.MeasureJudged {
			continue
		}
		if by[n.A] == nil {
			order = append(order, n.A)
		}
		by[n.A] = append(by[n.A], n)
	}
	var lines []string
	for _, a := range order {
		ns := by[a]
		same := true
		var specs []string
		for _, n := range ns {
			same = same && n.Injections == ns[0].Injections
			specs = append(specs, n.Class)
		}
		if !same {
			for i, n := range ns {
				specs[i] = fmt.Sprintf("%s (%d)", n.Class, n.Injections)
			}
			lines = append(lines, fmt.Sprintf("Would judge %s: tested injections of %s.", a, strings.Join(specs, ", ")))
			continue
		}
		lines = append(lines, fmt.Sprintf("Would judge %s: %s of %s.", a, plural(int64(ns[0].Injections), "tested injection")+eachOf(len(ns)),
			strings.Join(specs, ", ")))
	}
	return lines
}

// eachOf is " each" for more than one.
func eachOf(n int) string {
	if n > 1 {
		return " each"
	}
	return ""
}

// AnswerText writes the decided answer of f in words, one intent after
// the other, for the terminal; nothing when f holds no answer.
func AnswerText(w io.Writer, f *results.File) error {
	if f == nil || f.Answer == nil {
		return nil
	}
	var b strings.Builder
	for _, box := range decisionBoxes(f.Answer) {
		fmt.Fprintf(&b, "%s\n  %s\n", box.title, box.answer)
		for _, e := range box.evidence {
			fmt.Fprintf(&b, "  - %s\n", e)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
