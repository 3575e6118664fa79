package answer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/results"
)

// free returns trials fault-free cases of a backend on fresh servers (or
// not), one per trial, at the throughputs given.
func free(backend string, fresh bool, tps ...float64) []results.Case {
	var out []results.Case
	for i, tp := range tps {
		out = append(out, results.Case{Backend: backend, Workload: "uniform", Fault: "none", Guard: "none", Clients: 8, Trial: i + 1,
			FreshServers: fresh, Throughput: tp, Acquired: 1000, ContendedGrants: 300, Nodes: 1, LinearizableFenced: results.Linearizable})
	}
	return out
}

// faulted returns a case of a backend under a class whose injections had
// the incidents given: 'b' a lock bug, 'e' an expired holder, 'x' not
// tested, '.' nothing.
func faulted(backend, class, guard, injections string) results.Case {
	c := results.Case{Backend: backend, Workload: "uniform", Fault: class, FaultClass: class, Guard: guard, Clients: 8, Trial: 1,
		Fencing: guard != "none", Nodes: 1, LinearizableFenced: results.Linearizable, Injections: len(injections)}
	tested := 0
	for i, r := range injections {
		ok := r != 'x'
		tg := results.Target{Injection: i + 1, Tested: &ok}
		switch r {
		case 'b':
			tg.Incidents, tg.IncidentsLockBug = 1, 1
			c.Incidents, c.IncidentsLockBug = c.Incidents+1, c.IncidentsLockBug+1
		case 'e':
			tg.Incidents = 1
			c.Incidents, c.IncidentsExpiredHolder = c.Incidents+1, c.IncidentsExpiredHolder+1
		case 'x':
			tg.WhyNot = "no section open at the strike"
		}
		if ok {
			tested++
		}
		c.Targets = append(c.Targets, tg)
	}
	c.InjectionsTested = &tested
	return c
}

func decideCases(t *testing.T, p results.Profile, cases ...[]results.Case) results.Answer {
	t.Helper()
	f := &results.File{}
	for _, cs := range cases {
		f.Cases = append(f.Cases, cs...)
	}
	a, err := Decide(f, p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func one(c results.Case) []results.Case { return []results.Case{c} }

func hasSeparation(ch *results.Choice, winner, loser, measure string) bool {
	return slices.ContainsFunc(ch.Separations, func(s results.Separation) bool {
		return s.Winner == winner && s.Loser == loser && s.Measure == measure
	})
}

// TestPairwiseClasses fails on the old rule that compared qualifiers only
// on the classes every one of them faced: c never faced restart, and
// that must not take restart out of the comparison of a and b, where b
// had a lock bug after every injection.
func TestPairwiseClasses(t *testing.T) {
	a := decideCases(t, results.Profile{Intent: results.IntentEfficiency},
		free("a", false, 1000, 1000, 1000), free("b", false, 1000, 1000, 1000), free("c", false, 1000, 1000, 1000),
		one(faulted("a", "restart", "none", "............")), one(faulted("b", "restart", "none", "bbbbbbbbbbbb")),
		one(faulted("a", "client-pause", "none", "....")), one(faulted("b", "client-pause", "none", "....")),
		one(faulted("c", "client-pause", "none", "....")))
	ch := a.Efficiency
	if !hasSeparation(ch, "a", "b", results.MeasureLockBugs) {
		t.Fatalf("b not set apart by a on lock bugs under restart: %+v", ch)
	}
	if slices.Contains(ch.Pick, "b") {
		t.Errorf("pick %v holds b", ch.Pick)
	}
	if !strings.Contains(strings.Join(ch.Reasons, "\n"), "only a faced restart") {
		t.Errorf("reasons do not say c never faced restart:\n%s", strings.Join(ch.Reasons, "\n"))
	}
}

// TestExpiredHoldersNotRanked fails on the old rule that ranked
// efficiency on every incident: a lease whose holders expire under
// client-pause (the lease working) is not set apart on lock bugs from a
// lock that never expires, and wins on speed.
func TestExpiredHoldersNotRanked(t *testing.T) {
	a := decideCases(t, results.Profile{Intent: results.IntentEfficiency},
		free("lease", true, 6000, 6100, 5900, 6050), free("advisory", true, 1000, 1010, 990, 1005),
		one(faulted("lease", "client-pause", "none", "eeeeeeeeeeee")), one(faulted("advisory", "client-pause", "none", "............")))
	ch := a.Efficiency
	if hasSeparation(ch, "advisory", "lease", results.MeasureLockBugs) {
		t.Fatalf("expired holders ranked the lease below the advisory lock: %+v", ch.Separations)
	}
	if !ch.Decided || ch.Pick[0] != "lease" || !hasSeparation(ch, "lease", "advisory", results.MeasureSpeed) {
		t.Fatalf("want the 6x faster lease decided on speed, got %+v", ch)
	}
	if !strings.Contains(strings.Join(ch.Reasons, "\n"), "Expired holders of lease") {
		t.Errorf("the expired holders are not reported:\n%s", strings.Join(ch.Reasons, "\n"))
	}
}

// correct returns the cases with which a backend qualifies for
// correctness, plus extra.
func correct(backend string, extra ...results.Case) []results.Case {
	cs := free(backend, false, 1000, 1000, 1000)
	cs = append(cs, faulted(backend, "client-pause", "fence", "......"), faulted(backend, "restart", "fence", "......"))
	return append(cs, extra...)
}

// TestInvalidKeepsLockBug fails on the old rule that dropped an invalid
// case from every conclusion: the lock bug of its tested first injection
// stands, while its untested second injection drops out.
func TestInvalidKeepsLockBug(t *testing.T) {
	bad := faulted("x", "clock-jump", "fence", "bx")
	bad.Invalid, bad.InvalidReason = true, "clock read back outside ±250 ms"
	a := decideCases(t, results.Profile{Intent: results.IntentCorrectness}, correct("x", bad), correct("y"))
	ch := a.Correctness
	if slices.Contains(ch.Pick, "x") {
		t.Fatalf("x picked despite its lock bug: %+v", ch)
	}
	i := slices.IndexFunc(ch.Unqualified, func(s string) bool { return strings.HasPrefix(s, "x: lock bugs") })
	if i < 0 {
		t.Fatalf("x not out for its lock bug: %q", ch.Unqualified)
	}
	if !strings.Contains(ch.Unqualified[i], "in 1 of 1 tested injection") || !strings.Contains(ch.Unqualified[i], "later invalid") {
		t.Errorf("reason %q: want the one tested injection, from a case later invalid", ch.Unqualified[i])
	}
	// Without the lock bug, the invalid case adds nothing: x qualifies.
	clean := faulted("x", "clock-jump", "fence", ".x")
	clean.Invalid = true
	a = decideCases(t, results.Profile{Intent: results.IntentCorrectness}, correct("x", clean), correct("y"))
	if !slices.Contains(a.Correctness.Pick, "x") {
		t.Errorf("x with a clean invalid case: pick %v, unqualified %q", a.Correctness.Pick, a.Correctness.Unqualified)
	}
}

// TestSpeedNeedsIndependentTrials: a 6x speed difference separates from
// 3 independent trials a side, and never from trials on shared servers
// (they count as one), where the answer says what would settle it.
func TestSpeedNeedsIndependentTrials(t *testing.T) {
	for _, tt := range []struct {
		fresh, decided bool
	}{{true, true}, {false, false}} {
		a := decideCases(t, results.Profile{Intent: results.IntentEfficiency},
			free("redis", tt.fresh, 4400, 4300, 4500), free("table", tt.fresh, 730, 700, 760))
		ch := a.Efficiency
		if ch.Decided != tt.decided || ch.Pick[0] != "redis" {
			t.Errorf("fresh %v: decided %v pick %v, want decided %v on redis", tt.fresh, ch.Decided, ch.Pick, tt.decided)
		}
		if !tt.fresh && (len(ch.Needs) == 0 || ch.Needs[0].Trials < 3 || ch.Needs[0].Measure != results.MeasureSpeed) {
			t.Errorf("shared servers: needs %+v, want independent trials", ch.Needs)
		}
		if tt.fresh && ch.RunnerUp != "table" {
			t.Errorf("runner-up %q, want table", ch.RunnerUp)
		}
	}
}

// TestLooks: a decision on the same evidence is the same look; on more
// evidence the next, spending alpha/2^k.
func TestLooks(t *testing.T) {
	f := &results.File{Cases: free("a", true, 1, 2, 3)}
	a1, err := Decide(f, results.Profile{})
	if err != nil {
		t.Fatal(err)
	}
	f.Answer = &a1
	a2, _ := Decide(f, results.Profile{})
	f.Cases = append(f.Cases, free("b", true, 1, 2, 3)...)
	f.Answer = &a2
	a3, _ := Decide(f, results.Profile{})
	if len(a1.Looks) != 1 || len(a2.Looks) != 1 || len(a3.Looks) != 2 {
		t.Fatalf("looks %v, %v, %v: want 1, 1, 2", a1.Looks, a2.Looks, a3.Looks)
	}
	if got := a3.Looks[1].Spent; math.Abs(got-Alpha*0.75) > 1e-12 {
		t.Errorf("spent after 2 looks %v, want %v", got, Alpha*0.75)
	}
}

// TestDecideBadInput: every bad value is named.
func TestDecideBadInput(t *testing.T) {
	f := &results.File{Cases: free("a", true, 1)}
	for _, tt := range []struct {
		p    results.Profile
		want string
	}{
		{results.Profile{Intent: "speed"}, `intent "speed"`},
		{results.Profile{Token: "rw"}, `token "rw"`},
		{results.Profile{Backends: []string{"zk"}}, `profile backend "zk"`},
	} {
		_, err := Decide(f, tt.p)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrProfile) {
			t.Errorf("%+v: error %v, want ErrProfile naming %s", tt.p, err, tt.want)
		}
	}
	if _, err := Decide(nil, results.Profile{}); err == nil {
		t.Error("nil file: no error")
	}
}

// TestCaseCountsCharged: targets that charge no incident (a file from
// before their counts) leave the case's lock bugs charged to its tested
// injections, as many as it had, at most all; an invalid case's
// unjudged targets count for nothing, since one of them failed.
func TestCaseCountsCharged(t *testing.T) {
	old := faulted("x", "clock-jump", "fence", "....")
	for i := range old.Targets {
		old.Targets[i].Tested = nil
	}
	old.InjectionsTested = nil
	old.Incidents, old.IncidentsLockBug = 2, 2
	a := decideCases(t, results.Profile{Intent: results.IntentCorrectness}, correct("x", old), correct("y"))
	if !slices.ContainsFunc(a.Correctness.Unqualified, func(s string) bool { return strings.Contains(s, "x: lock bugs: under clock-jump in 2 of 4") }) {
		t.Errorf("case-level lock bugs not charged: %q", a.Correctness.Unqualified)
	}
	old.Invalid = true
	a = decideCases(t, results.Profile{Intent: results.IntentCorrectness, Backends: []string{"x"}}, correct("x", old), correct("y"))
	if !slices.Equal(a.Correctness.Pick, []string{"x"}) {
		t.Fatalf("an invalid case's unjudged injections counted: pick %v, out %q", a.Correctness.Pick, a.Correctness.Unqualified)
	}
	if !slices.ContainsFunc(a.Correctness.NotTested, func(s string) bool { return strings.HasPrefix(s, "clock-jump: 4 injections, none tested") }) {
		t.Errorf("the invalid case's injections not said untested: %q", a.Correctness.NotTested)
	}
}

// TestHave: the answer is a lock on servers the team runs when one
// qualifies, the others named as what it would add; when none does, the
// nearest candidate it would add, said so.
func TestHave(t *testing.T) {
	kind := func(k string, cs []results.Case) []results.Case {
		for i := range cs {
			cs[i].ServerKind = k
		}
		return cs
	}
	fast, slow := kind("etcd", free("etcd", true, 6000, 6100, 5900)), kind("postgres", free("table", true, 700, 720, 690))
	a := decideCases(t, results.Profile{Intent: results.IntentEfficiency, Have: []string{"postgres"}}, fast, slow)
	ch := a.Efficiency
	if !slices.Equal(ch.Pick, []string{"table"}) || !strings.Contains(strings.Join(ch.Reasons, "\n"), "you would add them): etcd") {
		t.Errorf("have postgres: pick %v, reasons:\n%s", ch.Pick, strings.Join(ch.Reasons, "\n"))
	}
	a = decideCases(t, results.Profile{Intent: results.IntentEfficiency, Have: []string{"redis"}}, fast, slow)
	ch = a.Efficiency
	if ch.Pick[0] != "etcd" || !strings.Contains(strings.Join(ch.Reasons, "\n"), "the nearest, etcd, runs on etcd: you would add it") {
		t.Errorf("have redis: pick %v, reasons:\n%s", ch.Pick, strings.Join(ch.Reasons, "\n"))
	}
}

// TestWouldAddWaitsForNothing: when a candidate on the team's servers
// qualifies, one it would add and that the budget left unjudged cannot
// change the answer: nothing is asked to judge it, and the pick is
// decided without it.
func TestWouldAddWaitsForNothing(t *testing.T) {
	f := &results.File{}
	for _, c := range free("table", true, 700, 720, 690) {
		c.ServerKind = "postgres"
		f.Cases = append(f.Cases, c)
	}
	f.Skipped = []results.Skip{{Backend: "etcd", FaultClass: "server-pause", Fault: "server-pause", Cut: true, ServerKind: "etcd",
		Reason: "not run in round 1: left out for the budget"}}
	p := results.Profile{Intent: results.IntentEfficiency, Have: []string{"postgres"}, Backends: []string{"table", "etcd"}}
	a, err := Decide(f, p)
	if err != nil {
		t.Fatal(err)
	}
	ch := a.Efficiency
	if !slices.Equal(ch.Pick, []string{"table"}) || !ch.Decided {
		t.Errorf("pick %v decided %v: want table, decided (%q)", ch.Pick, ch.Decided, ch.Reasons)
	}
	if i := slices.IndexFunc(ch.Needs, func(n results.Need) bool { return n.A == "etcd" }); i >= 0 {
		t.Errorf("asked to judge a candidate the team would add: %+v", ch.Needs[i])
	}
	// Without the servers named, etcd could still outrank the pick.
	p.Have = nil
	if a, err = Decide(f, p); err != nil {
		t.Fatal(err)
	}
	if ch := a.Efficiency; ch.Decided || !slices.ContainsFunc(ch.Needs, func(n results.Need) bool { return n.A == "etcd" }) {
		t.Errorf("without have: decided %v needs %+v: want etcd judged first", ch.Decided, ch.Needs)
	}
}

// TestTieSaysItsPrice: a tie names what would settle it and about how
// long that runs, from the run's own case durations.
func TestTieSaysItsPrice(t *testing.T) {
	slow := func(cs []results.Case) []results.Case {
		for i := range cs {
			cs[i].DurationS = 60
		}
		return cs
	}
	a := decideCases(t, results.Profile{Intent: results.IntentEfficiency},
		slow(free("a", false, 1000, 1100, 900)), slow(free("b", false, 1000, 1050, 950)))
	ch := a.Efficiency
	if ch.Decided || len(ch.Needs) == 0 {
		t.Fatalf("want a tie with needs, got %+v", ch)
	}
	n := ch.Needs[0]
	// Trials on shared servers count as one: n.Trials-1 more a side, a
	// minute each.
	want := fmt.Sprintf("(≈ %d min of running, server starts aside)", 2*(n.Trials-1))
	if !strings.Contains(ch.Reasons[0], want) {
		t.Errorf("reason %q lacks %q", ch.Reasons[0], want)
	}
}

// TestTokenChoosesTheGuard: what the resource can do with a token picks
// the guard a correctness lock is judged under — a lease whose expired
// holders' late writes only fencing stops qualifies when the resource
// checks tokens on writes, and not when it can check none.
func TestTokenChoosesTheGuard(t *testing.T) {
	late := faulted("lease", "client-pause", "none", "eeee")
	late.StaleAccepted = 4
	cases := append(correct("lease"), late)
	for _, tt := range []struct {
		token string
		want  bool
	}{{results.TokenWrite, true}, {results.TokenNone, false}} {
		a := decideCases(t, results.Profile{Intent: results.IntentCorrectness, Token: tt.token}, cases)
		if got := slices.Contains(a.Correctness.Pick, "lease"); got != tt.want {
			t.Errorf("token %s: lease picked %v, want %v (out: %q)", tt.token, got, tt.want, a.Correctness.Unqualified)
		}
	}
}

// TestSpeedTrialWithoutGrants: a trial in which a lock granted nothing
// is its slowest, not a trial left out. A lock that stalled once does
// not beat a steady one on its two good trials (the logarithm used to
// drop the stall); and one that is slower anyway, stall included, is
// still set apart by the rank-sum test.
func TestSpeedTrialWithoutGrants(t *testing.T) {
	a := decideCases(t, results.Profile{Intent: results.IntentEfficiency},
		free("stall", true, 5000, 5100, 0), free("steady", true, 4000, 4100, 4050))
	if hasSeparation(a.Efficiency, "stall", "steady", results.MeasureSpeed) {
		t.Errorf("a lock with a trial of zero grants set apart as faster: %+v", a.Efficiency.Separations)
	}
	a = decideCases(t, results.Profile{Intent: results.IntentEfficiency},
		free("redis", true, 4400, 4300, 4500, 4450, 4350, 4420), free("table", true, 730, 0, 760, 700, 710, 740))
	if !hasSeparation(a.Efficiency, "redis", "table", results.MeasureSpeed) || !a.Efficiency.Decided {
		t.Errorf("6 trials a side, the slower lock stalled once: separations %+v, decided %v, want redis over table",
			a.Efficiency.Separations, a.Efficiency.Decided)
	}
}

// TestSpeedStaysOnFreshTrials: a later round that runs fault-free cases
// of more backends on shared servers (the candidates it had to judge,
// on the hot key) does not move the speed comparison off the workload
// whose trials ran on fresh servers (run of advise --intent efficiency
// --budget 5m: redis against the lease table became "1 trial on the same
// servers, not compared").
func TestSpeedStaysOnFreshTrials(t *testing.T) {
	cases := slices.Concat(free("redis", true, 5900, 6000, 5950, 6040), free("table", true, 3600, 3200, 3660, 3500))
	for _, b := range []string{"redis", "table", "x", "y", "z"} {
		c := free(b, false, 380)[0]
		c.Workload = workloadHot
		cases = append(cases, c)
	}
	a := decideCases(t, results.Profile{Intent: results.IntentEfficiency}, cases)
	if !hasSeparation(a.Efficiency, "redis", "table", results.MeasureSpeed) {
		t.Errorf("redis not set apart from the table on speed from 4 fresh trials a side: %+v (%q)", a.Efficiency.Separations,
			a.Efficiency.Reasons)
	}
}

// TestNoneQualifiesNamesTheNearestToAdd: when no candidate on the
// servers the team runs qualifies, the answer names, of those it would
// add and could still qualify, the one fewest classes from judged (issue
// 28's correctness Done-when); never one that is out for good.
func TestNoneQualifiesNamesTheNearestToAdd(t *testing.T) {
	kind := func(k string, cs []results.Case) []results.Case {
		for i := range cs {
			cs[i].ServerKind = k
		}
		return cs
	}
	f := &results.File{}
	f.Cases = append(f.Cases, kind("redis", correct("mine", faulted("mine", "clock-jump", "fence", "b..")))...)
	f.Cases = append(f.Cases, kind("etcd", correct("near"))...)
	f.Cases = append(f.Cases, kind("sentinel", correct("lost", faulted("lost", "failover", "fence", "bbb")))...)
	f.Skipped = []results.Skip{
		{Backend: "near", FaultClass: "clock-jump", Fault: "clock-jump", Cut: true, Reason: "left out", ServerKind: "etcd"},
		{Backend: "far", FaultClass: "client-pause", Fault: "client-pause", Cut: true, Reason: "left out", ServerKind: "zookeeper"},
		{Backend: "far", FaultClass: "restart", Fault: "restart", Cut: true, Reason: "left out", ServerKind: "zookeeper"},
	}
	p := results.Profile{Intent: results.IntentCorrectness, Token: results.TokenWrite, Have: []string{"redis"},
		Backends: []string{"mine", "far", "near", "lost"}}
	a, err := Decide(f, p)
	if err != nil {
		t.Fatal(err)
	}
	ch := a.Correctness
	words := strings.Join(ch.Reasons, "\n")
	if len(ch.Pick) != 0 || !strings.Contains(words, "Of the candidates you would add, the nearest is near, on etcd: not judged") {
		t.Errorf("pick %v, reasons:\n%s\nwant none, and near named the nearest to add", ch.Pick, words)
	}
	if strings.Contains(words, "nearest is far") || strings.Contains(words, "nearest is lost") {
		t.Errorf("reasons:\n%s\nwant near, not far (two cases away) or lost (out for good)", words)
	}
}
