package advise_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/advise"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// doneWhen is the first profile: a team on Redis and PostgreSQL
// that needs correctness, 200 ms holds, 5 s leases, 8 clients.
func doneWhen() advise.Profile {
	p := advise.Default()
	p.Intent, p.Have, p.HoldP50, p.HoldP99, p.TTL, p.Clients = advise.IntentCorrectness, []string{"redis", "postgres"}, 200*time.Millisecond,
		200*time.Millisecond, 5*time.Second, 8
	return p
}

// TestPlanCandidatesAndClasses: the team's candidates come first and say
// so; the ablation variants and the control are not candidates; the
// classes follow the profile (no stall, no clock-step: out, with why;
// pauses sized from the profile).
func TestPlanCandidatesAndClasses(t *testing.T) {
	p := doneWhen()
	pl, err := advise.New(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	var specs []string
	seenAdd := false
	for _, c := range pl.Candidates {
		specs = append(specs, c.Spec)
		if want := c.Kind == "redis" || c.Kind == "postgres"; c.Have != want {
			t.Errorf("%s on %s: have %v", c.Spec, c.Kind, c.Have)
		}
		if !c.Have {
			seenAdd = true
		} else if seenAdd {
			t.Errorf("%s, which the team runs, comes after a candidate it would add: %v", c.Spec, specs)
		}
	}
	for _, not := range []string{"noop", "redlock?quarantine=false", "sentinel?wait=1"} {
		if slices.Contains(specs, not) {
			t.Errorf("%s is a candidate: %v", not, specs)
		}
	}
	for _, want := range []string{"redis", "redlock", "postgres?mode=lease", "etcd", "zookeeper"} {
		if !slices.Contains(specs, want) {
			t.Errorf("%s is not a candidate: %v", want, specs)
		}
	}
	class := func(pl *advise.Plan, name string) advise.Class {
		for _, c := range pl.Classes {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no class %s", name)
		return advise.Class{}
	}
	if c := class(pl, "client-pause"); !c.In || c.Spec != "client-pause?x=0.3" {
		t.Errorf("client-pause for 1.5s stalls on 5s leases: %+v, want in, x=0.3", c)
	}
	if c := class(pl, "power-loss"); !c.In {
		t.Errorf("power-loss out of a correctness plan: %+v", c)
	}
	p.MaxPause, p.ClockStep, p.Intent = 0, 0, advise.IntentEfficiency
	pl, err = advise.New(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"client-pause", "clock-jump", "power-loss", "clock-rate"} {
		if c := class(pl, name); c.In || c.Why == "" {
			t.Errorf("%s in an efficiency plan without stalls or clock steps: %+v", name, c)
		}
	}
	for _, c := range pl.Cases {
		if !slices.ContainsFunc(pl.Classes, func(cl advise.Class) bool { return cl.In && cl.Name == c.Fault.Class() }) {
			t.Errorf("case %s under a class the plan left out", c)
		}
	}
}

// TestPlanLoadReachesCases: the profile's hold, TTL, clients and keys
// reach every case; sections under a fault that loses data are held
// long enough for a restart's recovery; auto-extension reaches the
// cases; the baseline's trials run on fresh servers, a backend's trial
// at a time.
func TestPlanLoadReachesCases(t *testing.T) {
	p := doneWhen()
	p.KeyDist, p.Keys = "zipf", 50
	pl, err := advise.New(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Cases) == 0 {
		t.Fatal("no case")
	}
	var last [2]int
	trialOf := map[string]int{}
	for i, c := range pl.Cases {
		s := c.Spec
		if s.TTL != 5*time.Second || s.Clients != 8 {
			t.Errorf("%s: ttl %v, clients %d (want the profile's 5s, 8)", c, s.TTL, s.Clients)
		}
		switch c.Fault.Class() {
		case "restart", "power-loss", "failover":
			if s.Hold.Mean() < time.Second {
				t.Errorf("%s: hold %v, shorter than a restart's recovery", c, s.Hold)
			}
		default:
			if s.Hold.String() != "200ms" {
				t.Errorf("%s: hold %v, want the profile's 200ms", c, s.Hold)
			}
		}
		if c.Fault.Class() == "none" && c.ClientsAs == results.ClientsGoroutines {
			if !c.Fresh || s.Workload != workloads.Zipf || s.Keys != 50 {
				t.Errorf("%s: fresh %v, workload %s keys %d (want fresh, zipf, 50)", c, c.Fresh, s.Workload, s.Keys)
			}
			// Trials in order, each backend's cases of a trial together.
			if c.Trial < last[0] {
				t.Errorf("case %d (%s) goes back to trial %d after %d", i, c, c.Trial, last[0])
			}
			if prev, ok := trialOf[c.Backend.Spec]; ok && prev == c.Trial && last[1] != i-1 {
				t.Errorf("case %d (%s): its trial's cases are not together", i, c)
			}
			trialOf[c.Backend.Spec], last = c.Trial, [2]int{c.Trial, i}
		}
	}
	p.AutoExtend, p.HoldP50, p.HoldP99 = true, 12*time.Second, 12*time.Second
	pl, err = advise.New(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pl.Cases {
		if !c.Spec.AutoExtend || c.Spec.AcquireTimeout < 12*time.Second {
			t.Errorf("%s: auto-extend %v, acquire timeout %v (want on, and at least a hold)", c, c.Spec.AutoExtend, c.Spec.AcquireTimeout)
		}
	}
}

// TestPlanBudget: a budget keeps round 1 within three quarters of it,
// the team's candidates first, and names what it cut; without one,
// nothing is cut. The plan's sample sizes are the statistics': 10
// injections bound a zero below 26%, and a 6× speed difference needs
// no more trials than round 1 gives.
func TestPlanBudget(t *testing.T) {
	whole, err := advise.New(doneWhen(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Cut) != 0 || whole.Estimate != advise.Estimate(whole.Cases) {
		t.Fatalf("no budget, yet %d cut", len(whole.Cut))
	}
	pl, err := advise.New(doneWhen(), 8*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Estimate > 6*time.Minute || len(pl.Cut) == 0 || len(pl.Cases) >= len(whole.Cases) {
		t.Fatalf("8m budget: round 1 estimated %v with %d of %d cases, %d cut", pl.Estimate, len(pl.Cases), len(whole.Cases), len(pl.Cut))
	}
	// What round 1 leaves out is in the results as cases cut, so that the
	// answer judges no candidate without them (answer.TestCutCaseIsNotAPass):
	// every cut cell, and none that runs.
	cutSkips := map[string]bool{}
	for _, s := range pl.Skipped {
		if s.Cut {
			cutSkips[s.Backend+" under "+s.FaultClass] = true
		}
	}
	for _, cut := range pl.Cut {
		if cell, _, _ := strings.Cut(cut, " (≈"); !cutSkips[cell] {
			t.Errorf("%q cut from round 1, but not recorded as a case cut (skips %v)", cut, cutSkips)
		}
	}
	for _, c := range pl.Cases {
		if cutSkips[c.Backend.Spec+" under "+c.Fault.Class()] {
			t.Errorf("%s runs in round 1, yet is recorded as cut", c)
		}
	}
	have := map[string]bool{}
	for _, c := range pl.Candidates {
		have[c.Spec] = c.Have
	}
	for _, c := range pl.Cases {
		if !have[c.Backend.Spec] && c.Fault.Class() != "none" {
			// Cut before any of the team's (the plan runs theirs first).
			for _, cut := range pl.Cut {
				for spec, h := range have {
					if h && strings.HasPrefix(cut, spec+" under") {
						t.Errorf("%s runs, yet %q, of a candidate the team runs, was cut", c, cut)
					}
				}
			}
		}
	}
	if pl.Qualify != 10 {
		t.Errorf("qualification needs %d injections, want 10 (at most 26%% at 95%%)", pl.Qualify)
	}
	if n := advise.TrialsToSeparate(6, 0.2, pl.Level, advise.Power); n > 4 {
		t.Errorf("a 6× speed difference needs %d trials a side, more than round 1's 4", n)
	}
	if n := advise.InjectionsToBound(0.26, 0.95); n != 10 {
		t.Errorf("InjectionsToBound(0.26) = %d, want 10", n)
	}
}

// TestMakeBenchFitsItsBudget: make bench's plan at its 15 minutes runs
// the whole catalogue in round 1, its cells counted as they run (one
// start of servers shared by the cells that need the same ones), not as
// the sum of each cell alone, which once cut the consensus locks'
// partition-halves from a round 1 that had the time.
func TestMakeBenchFitsItsBudget(t *testing.T) {
	pl, err := advise.New(advise.Default(), 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Cut) > 0 || pl.Estimate > 15*time.Minute-advise.Closing(15*time.Minute) {
		t.Errorf("round 1 estimated %v, cut %q", pl.Estimate, pl.Cut)
	}
}

// TestEstimateDefaultSuite: the estimate of the default suite's cases
// (without fresh trials) is within a quarter of make bench's measured
// 14 min 5 s (run e7950b7d, a quiet machine).
func TestEstimateDefaultSuite(t *testing.T) {
	plan, err := suites.Default().Plan()
	cases := plan.Cases
	if err != nil {
		t.Fatal(err)
	}
	got, want := advise.Estimate(cases), 14*time.Minute+5*time.Second
	t.Logf("default suite: %d cases estimated %v (measured %v)", len(cases), got, want)
	if got < want*3/4 || got > want*5/4 {
		t.Errorf("estimate %v, more than a quarter off the measured %v", got, want)
	}
}

// TestMore: a need is counted in all, so the next round runs only what
// the results lack, continuing their trials: speed on fresh servers,
// injections of the need's class.
func TestMore(t *testing.T) {
	pl, err := advise.New(doneWhen(), 0)
	if err != nil {
		t.Fatal(err)
	}
	three := 3
	f := &results.File{}
	for trial := range 4 {
		f.Cases = append(f.Cases, results.Case{Backend: "redis", Fault: "none", FaultClass: "none", Trial: trial, FreshServers: true, Guard: "none"})
	}
	for _, g := range []string{"none", "fence"} {
		f.Cases = append(f.Cases, results.Case{Backend: "redis", Fault: "restart", FaultClass: "restart", Guard: g, Injections: 3, InjectionsTested: &three})
	}
	cases, dropped := pl.More(f, []results.Need{
		{A: "redis", B: "redlock", Measure: results.MeasureSpeed, Trials: 6},
		{A: "redis", B: "postgres?mode=lease", Measure: results.MeasureLockBugs, Class: "restart", Injections: 10},
	}, 0)
	if len(dropped) != 0 {
		t.Fatalf("dropped %v without a budget", dropped)
	}
	count := map[string]int{}
	for _, c := range cases {
		key := c.Backend.Spec + "/" + c.Fault.Class()
		count[key]++
		switch key {
		case "redis/none":
			if !c.Fresh || c.Trial < 4 {
				t.Errorf("%s: fresh %v, trial %d (want fresh, after the 4 run)", c, c.Fresh, c.Trial)
			}
		case "redis/restart":
			if c.Injections != 7 || c.Trial != 1 {
				t.Errorf("%s: %d injections, trial %d (want the 7 of 10 missing, trial 1)", c, c.Injections, c.Trial)
			}
		case "redlock/none":
			if !c.Fresh || c.Trial >= 6 {
				t.Errorf("%s: fresh %v, trial %d", c, c.Fresh, c.Trial)
			}
		}
	}
	if count["redis/none"] != 2 || count["redlock/none"] != 6 || count["redis/restart"] != 1 || count["postgres?mode=lease/restart"] != 1 {
		t.Errorf("next round: %v (want 2 and 6 fresh trials, one restart case each)", count)
	}
	// Within a budget that fits nothing, everything is dropped.
	if cases, dropped := pl.More(f, []results.Need{{A: "zookeeper", B: "etcd", Measure: results.MeasureSpeed, Trials: 10}}, time.Second); len(cases) != 0 || len(dropped) != 2 {
		t.Errorf("a 1s budget: %d cases, %d dropped", len(cases), len(dropped))
	}
}

// TestMoreJudgesByClass: a round short of time judges the classes that
// put locks out first, whichever candidate's they are — redlock's clock
// jump before the lease table's server pause, though the lease table
// comes first among the candidates (run 838c0bbd's round 2 spent its
// quarter on the lease table's partition and server-pause).
func TestMoreJudgesByClass(t *testing.T) {
	pl, err := advise.New(doneWhen(), 8*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	needs := []results.Need{
		{A: "postgres?mode=lease", Measure: results.MeasureJudged, Class: "server-pause", Injections: 3},
		{A: "redlock", Measure: results.MeasureJudged, Class: "clock-jump?by=0.1", Injections: 3},
	}
	all, _ := pl.More(nil, needs, 0)
	if len(all) < 2 || all[0].Backend.Spec != "redlock" || all[0].Fault.Class() != "clock-jump" {
		t.Fatalf("without a budget: %v (want redlock's clock jump first)", all)
	}
	cases, dropped := pl.More(nil, needs, advise.Estimate(all[:1])+time.Second)
	if len(cases) != 1 || cases[0].Backend.Spec != "redlock" || len(dropped) != 1 || dropped[0].A != "postgres?mode=lease" {
		t.Errorf("room for one: ran %v, dropped %+v (want redlock's clock jump run, the lease table's server pause dropped)", cases, dropped)
	}
}

// TestRoundOneRunsInPriorityOrder: make bench's round 1 runs its cases
// class by class in the order the answer needs them (the baseline, then
// client pauses, ...), so a budget that ends the round early cuts the
// class that matters least — not the lease matrix the suite lists last,
// whose last backend then missed the variant that put the others out.
func TestRoundOneRunsInPriorityOrder(t *testing.T) {
	pl, err := advise.New(advise.Default(), 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]int{}
	last := map[string]int{}
	for i, c := range pl.Cases {
		if c.Backend.Descriptor.Control {
			continue
		}
		cls := c.Fault.Class()
		if _, ok := first[cls]; !ok {
			first[cls] = i
		}
		last[cls] = i
	}
	for _, order := range [][2]string{{"none", "client-pause"}, {"client-pause", "restart"}, {"client-pause", "server-pause"}} {
		a, b := order[0], order[1]
		if _, ok := first[b]; !ok {
			continue
		}
		if last[a] > first[b] {
			t.Errorf("a %s case (%d) runs after the first %s case (%d)", a, last[a], b, first[b])
		}
	}
}

// TestMoreSpeedAtItsPoint: more speed trials run only what the answer's
// comparison needs — the reference workload, at the client counts up to
// the backend's peak, in the sweep's order (the cases before the peak
// are its warm-up, as in round 1) — not the hot key or the counts past
// the peak.
func TestMoreSpeedAtItsPoint(t *testing.T) {
	pl, err := advise.New(advise.Default(), 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &results.File{}
	for trial := range 3 {
		for clients, tp := range map[int]float64{1: 500, 16: 4000, 32: 3900, 64: 3000} {
			f.Cases = append(f.Cases, results.Case{Backend: "redis", Workload: "uniform", Fault: "none", FaultClass: "none", Guard: "none",
				Clients: clients, Trial: trial, FreshServers: true, Throughput: tp + float64(trial)})
		}
		f.Cases = append(f.Cases, results.Case{Backend: "redis", Workload: "hot", Fault: "none", FaultClass: "none", Guard: "none",
			Clients: 16, Trial: trial, FreshServers: true, Throughput: 300})
	}
	cases, _ := pl.More(f, []results.Need{{A: "redis", B: "redlock", Measure: results.MeasureSpeed, Trials: 6}}, 0)
	var got []string
	for _, c := range cases {
		if c.Backend.Spec != "redis" {
			continue
		}
		got = append(got, fmt.Sprintf("%s/%d/%d", c.Spec.Workload, c.Spec.Clients, c.Trial))
		if !c.Fresh {
			t.Errorf("%s: not on fresh servers", c)
		}
	}
	want := []string{"uniform/1/3", "uniform/16/3", "uniform/1/4", "uniform/16/4", "uniform/1/5", "uniform/16/5"}
	if !slices.Equal(got, want) {
		t.Errorf("redis's next round: %v\nwant %v", got, want)
	}
}
