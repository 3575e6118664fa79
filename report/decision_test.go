package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// TestRendersDecidedAnswer: with an answer in results.json the report
// opens with it — the pick, its separations, what would settle a tie —
// says how it was decided, and the terminal prints it; the report's own
// recommendation stays below as the evidence per backend, and is no
// second answer: no backend marked recommended, no older rules, no
// second recommendation in the terminal's summary. Without envelopes it
// says what it left to them.
func TestRendersDecidedAnswer(t *testing.T) {
	f := twoLocks(t).without(func(*results.Case) bool { return false })
	f.Answer = &results.Answer{Alpha: 0.05, Looks: []results.Look{{N: 1, Cases: len(f.Cases), Spent: 0.025}},
		Efficiency: &results.Choice{Intent: results.IntentEfficiency, Pick: []string{"fast", "slow"}, RunnerUp: "slow",
			Reasons: []string{"fast and slow are tied: the evidence does not tell them apart at a 5% family-wise level."},
			Needs:   []results.Need{{A: "fast", B: "slow", Measure: results.MeasureSpeed, Trials: 7}}},
		Correctness: &results.Choice{Intent: results.IntentCorrectness, Pick: []string{"slow"}, Decided: true,
			Reasons:     []string{"Use slow, with fencing tokens checked by the resource: the only candidate that qualifies."},
			Separations: []results.Separation{{Winner: "slow", Loser: "fast", Measure: results.MeasureSpeed, P: 1e-5, Level: 1e-3}},
			Bounds:      []string{"no lock bug in 10 restart injections: at most 26% at 95%"}},
	}
	md := render(t, f)
	answerAt := strings.Index(md, "The answer")
	for _, want := range []string{
		"fast and slow are tied", "Would settle fast against slow on speed: 7 independent trials a side on fresh servers",
		"Use slow, with fencing tokens", "no lock bug in 10 restart injections: at most 26% at 95%",
		"How the answer is decided", "Evidence per backend",
	} {
		i := strings.Index(md, want)
		if i < 0 {
			t.Errorf("report.md lacks %q", want)
		} else if i < answerAt {
			t.Errorf("%q comes before the answer", want)
		}
	}
	if !strings.Contains(md, "make bench-envelope") {
		t.Errorf("report.md does not say that an answer without envelopes leaves where each lock breaks to make bench-envelope")
	}
	f.Envelopes = []results.Envelope{{Backend: "fast", Family: "client-pause", Unit: "lease", LeaseMS: 1000}}
	if md := render(t, f); strings.Contains(md, "left to make bench-envelope") {
		t.Errorf("report.md of an answer with its envelopes says they were left out")
	}
	for _, second := range []string{"Recommendation in full", "yes — recommended", "Rule 5"} {
		if strings.Contains(md, second) {
			t.Errorf("report.md holds %q: a second answer beside the decided one", second)
		}
	}
	var sum bytes.Buffer
	if err := report.Summary(&sum, f, 16); err != nil {
		t.Fatal(err)
	}
	if s := sum.String(); strings.Contains(s, "Efficiency locks:") || strings.Contains(s, "Correctness locks:") {
		t.Errorf("the summary prints the older recommendation beside the decided answer:\n%s", s)
	}
	var b bytes.Buffer
	if err := report.AnswerText(&b, f); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "For correctness") || !strings.Contains(b.String(), "Runner-up: slow.") {
		t.Errorf("terminal answer:\n%s", b.String())
	}
}

// TestNotJudgedReadsAsNotJudged: a candidate the run did not judge is
// listed as not judged yet, not as out, and what would judge it is one
// line a candidate, not one a fault.
func TestNotJudgedReadsAsNotJudged(t *testing.T) {
	f := &results.File{Answer: &results.Answer{Alpha: 0.05, Correctness: &results.Choice{Intent: results.IntentCorrectness,
		Reasons:     []string{"No candidate qualifies for correctness locks."},
		Unqualified: []string{"redis: lock bugs: under restart", "redlock: not judged: its planned cases under power-loss did not run"},
		Needs: []results.Need{{A: "redlock", Measure: results.MeasureJudged, Class: "power-loss", Injections: 3},
			{A: "redlock", Measure: results.MeasureJudged, Class: "clock-jump?by=0.1", Injections: 3},
			{A: "etcd", Measure: results.MeasureJudged, Class: "none", Injections: 3}}}}}
	var b bytes.Buffer
	if err := report.AnswerText(&b, f); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Would judge redlock: 3 tested injections each of power-loss, clock-jump?by=0.1.",
		"Would judge etcd: 3 tested injections of none.", "Out: redis: lock bugs", "Not judged yet: redlock: not judged"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the answer does not say %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "again") || strings.Contains(b.String(), "Out: redlock") {
		t.Errorf("a case never run said run again, or a not-judged candidate said out:\n%s", b.String())
	}
}
