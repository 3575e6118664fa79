package answer

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/results"
)

// TestCutCaseIsNotAPass fails on the old rule, under which a run that
// stopped before a candidate's last cases judged it on the rest: the
// variant that put the others out (a pause inside an extension) never
// ran against z, and z must not qualify on having missed it.
func TestCutCaseIsNotAPass(t *testing.T) {
	late := faulted("y", "client-pause", "fence", "ee")
	late.Fault, late.StaleAccepted = "client-pause?at=extend", 2
	f := &results.File{}
	for _, cs := range [][]results.Case{correct("y", late), correct("z")} {
		f.Cases = append(f.Cases, cs...)
	}
	ranLater := faulted("z", "client-pause", "fence", "...")
	ranLater.Fault, ranLater.Trial = "client-pause?at=extend", 2
	for _, tt := range []struct {
		name string
		cut  bool
		want bool
		// later is a later round's case of the cut spec.
		later []results.Case
	}{
		{"run to the end", false, true, nil},
		{"cut", true, false, nil},
		// A cell round 1 left out for the budget and a later round ran
		// is not missing any more.
		{"cut, then run", false, true, []results.Case{ranLater}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := *f
			g.Cases = append(slices.Clone(f.Cases), tt.later...)
			g.Skipped = nil
			if tt.cut || tt.later != nil {
				g.Skipped = []results.Skip{{Backend: "z", FaultClass: "client-pause", Fault: "client-pause?at=extend", Cut: true,
					Reason: "not run: the run's time ran out before it ran"}}
			}
			a, err := Decide(&g, results.Profile{Intent: results.IntentCorrectness, Token: results.TokenWrite})
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(a.Correctness.Pick, "z"); got != tt.want {
				t.Fatalf("z picked %v, want %v (out: %q)", got, tt.want, a.Correctness.Unqualified)
			}
			if tt.cut && !slices.ContainsFunc(a.Correctness.Unqualified, func(s string) bool {
				return strings.HasPrefix(s, "z: not judged") && strings.Contains(s, "client-pause?at=extend")
			}) {
				t.Errorf("z's reason does not name its cut case: %q", a.Correctness.Unqualified)
			}
			// Not judged reaches the plan: the next round re-runs the cut case.
			judged := slices.ContainsFunc(a.Correctness.Needs, func(n results.Need) bool {
				return n.A == "z" && n.Measure == results.MeasureJudged && n.Class == "client-pause?at=extend" && n.Injections > 0
			})
			if judged != tt.cut || a.Correctness.Decided == tt.cut {
				t.Errorf("cut %v: needs %+v, decided %v: want a judged need for z's cut case exactly when cut, and undecided then",
					tt.cut, a.Correctness.Needs, a.Correctness.Decided)
			}
		})
	}
}

// TestPickWithCutClassIsProvisional: an efficiency pick set apart on
// speed whose planned restart cases were left out of round 1 for the
// budget is not decided — under restart it could still lose its lock —
// and the answer asks for those cases first; once a round ran them, it
// is decided.
func TestPickWithCutClassIsProvisional(t *testing.T) {
	f := &results.File{}
	f.Cases = slices.Concat(free("fast", true, 4400, 4300, 4500, 4450, 4350, 4420), free("slow", true, 730, 760, 700, 710, 740, 720),
		one(faulted("slow", "restart", "none", "...")))
	f.Skipped = []results.Skip{{Backend: "fast", FaultClass: "restart", Fault: "restart", Cut: true,
		Reason: "not run in round 1: left out for the budget"}}
	a, err := Decide(f, results.Profile{Intent: results.IntentEfficiency})
	if err != nil {
		t.Fatal(err)
	}
	ch := a.Efficiency
	if len(ch.Pick) == 0 || ch.Pick[0] != "fast" || ch.Decided {
		t.Fatalf("pick %v decided %v: want fast, not decided", ch.Pick, ch.Decided)
	}
	if len(ch.Needs) == 0 || ch.Needs[0].A != "fast" || ch.Needs[0].Measure != results.MeasureJudged || ch.Needs[0].Class != "restart" {
		t.Errorf("needs %+v: want fast's restart first", ch.Needs)
	}
	if len(ch.Reasons) == 0 || !strings.Contains(ch.Reasons[0], "provisionally") || !strings.Contains(ch.Reasons[0], "restart") {
		t.Errorf("reasons %q: want the pick called provisional, naming restart", ch.Reasons)
	}
	f.Cases = append(f.Cases, faulted("fast", "restart", "none", "..."))
	if a, err = Decide(f, results.Profile{Intent: results.IntentEfficiency}); err != nil {
		t.Fatal(err)
	}
	if ch := a.Efficiency; len(ch.Pick) == 0 || ch.Pick[0] != "fast" || !ch.Decided {
		t.Errorf("after the round ran fast's restart: pick %v decided %v, want fast, decided (%q)", ch.Pick, ch.Decided, ch.Reasons)
	}
}

// TestCandidateNeverRunIsNotJudged: a candidate the budget left out of
// round 1 altogether is named not judged, with what would judge it — not
// dropped from the answer as if it had never been a candidate.
func TestCandidateNeverRunIsNotJudged(t *testing.T) {
	f := &results.File{Cases: correct("y")}
	f.Skipped = []results.Skip{{Backend: "z", FaultClass: "client-pause", Fault: "client-pause", Cut: true, Reason: "left out"},
		{Backend: "z", FaultClass: "restart", Fault: "restart", Cut: true, Reason: "left out"}}
	a, err := Decide(f, results.Profile{Intent: results.IntentCorrectness, Token: results.TokenWrite, Backends: []string{"y", "z"}})
	if err != nil {
		t.Fatal(err)
	}
	ch := a.Correctness
	if !slices.ContainsFunc(ch.Unqualified, func(s string) bool {
		return strings.HasPrefix(s, "z: not judged: its planned cases under client-pause, restart did not run")
	}) {
		t.Errorf("z not named not judged: %q", ch.Unqualified)
	}
	if slices.Contains(ch.Pick, "z") || !slices.Contains(ch.Pick, "y") {
		t.Errorf("pick %v: want y, never z", ch.Pick)
	}
	// y qualifies alone, but z could still qualify and outrank it.
	if ch.Decided || !slices.ContainsFunc(ch.Needs, func(n results.Need) bool { return n.A == "z" && n.Class == "restart" }) ||
		len(ch.Reasons) < 2 || !strings.HasPrefix(ch.Reasons[1], "Not decided yet: z not judged") {
		t.Errorf("decided %v, needs %+v, reasons %q: want undecided until z's cut cases ran", ch.Decided, ch.Needs, ch.Reasons)
	}
	// Without a profile naming it, a backend of cut cases only is no candidate.
	if a, err = Decide(f, results.Profile{Intent: results.IntentCorrectness, Token: results.TokenWrite}); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(a.Correctness.Unqualified, func(s string) bool { return strings.HasPrefix(s, "z:") }) {
		t.Errorf("z a candidate without being named: %q", a.Correctness.Unqualified)
	}
}

// TestUnjudgedVariantDoesNotHoldTheAnswer: a variant never run without
// faults is not judged for efficiency, but no round runs what it lacks:
// its faulted class that tested nothing must not keep a decided answer
// undecided (make bench's sentinel?wait=1, run 8401929d).
func TestUnjudgedVariantDoesNotHoldTheAnswer(t *testing.T) {
	variant := faulted("v", "failover", "none", "x")
	a := decideCases(t, results.Profile{Intent: results.IntentEfficiency},
		free("fast", true, 4400, 4300, 4500, 4450, 4350, 4420), free("slow", true, 730, 760, 700, 710, 740, 720), one(variant))
	if ch := a.Efficiency; len(ch.Pick) == 0 || ch.Pick[0] != "fast" || !ch.Decided {
		t.Errorf("pick %v decided %v (%q): want fast, decided", ch.Pick, ch.Decided, ch.Reasons)
	}
}
