package workloads

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends/noop"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// noops returns n noop Lockers, closed when t ends.
func noops(t *testing.T, n int) []locker.Locker {
	t.Helper()
	ls := make([]locker.Locker, n)
	for i := range ls {
		ls[i] = noop.New()
	}
	t.Cleanup(func() {
		for _, l := range ls {
			l.Close()
		}
	})
	return ls
}

func dist(t *testing.T, s string) Dist {
	t.Helper()
	d, err := ParseDist(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newJudge(t *testing.T) *judge.Judge {
	t.Helper()
	j, err := judge.New(judge.Options{CheckTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// runCase runs spec over lockers as one case of goroutine clients on the
// in-process judge j, with the resource under guards and section (when
// not nil) as the judge's section hook — a case as the runner composes
// it, without a nemesis. It returns the outcome, with the error when the
// case ran but was cut short.
func runCase(ctx context.Context, j *judge.Judge, spec Spec, guards []judge.Guard, lockers []locker.Locker, section judge.SectionHook) (*Outcome, error) {
	s, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	if len(lockers) != s.Clients {
		return nil, specErrorf("%d lockers for %d clients", len(lockers), s.Clients)
	}
	const host, id = "local", "case"
	info, err := j.Open(ctx, host, judge.CaseSpec{ID: id, Guards: guards, Processes: s.Clients, Duration: s.Duration, TimelineStep: s.TimelineStep})
	if err != nil {
		return nil, err
	}
	c := j.Case(id)
	c.SetHooks(section, nil)
	s.KeyPrefix = info.KeyPrefix
	clients := make([]Client, len(lockers))
	for i, l := range lockers {
		p := info.FirstProcess + i
		clients[i] = Client{Process: p, Locker: l, Judge: c.Local(host, p)}
	}
	runErr := Run(ctx, s, clients)
	if ctx.Err() != nil {
		c.Stop()
	}
	res, err := j.Finish(context.WithoutCancel(ctx), host, id)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	return &Outcome{Info: lockers[0].Info(), ClientsAs: results.ClientsGoroutines, Result: res}, runErr
}

// everyNth returns a section hook that gives a every n-th section of the
// case (section number divisible by n) and leaves the others alone.
func everyNth(n int64, a judge.Action) judge.SectionHook {
	return func(e judge.SectionEvent) judge.Action {
		if e.Section%n != 0 {
			return judge.Action{}
		}
		return a
	}
}

// run runs spec over lockers as one case with the resource under guards
// (GuardNone when none) and section as the judge's section hook, and
// fails t on an error.
func run(t *testing.T, spec Spec, lockers []locker.Locker, section judge.SectionHook, guards ...judge.Guard) *Outcome {
	t.Helper()
	if len(guards) == 0 {
		guards = []judge.Guard{judge.GuardNone}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := runCase(ctx, newJudge(t), spec, guards, lockers, section)
	if err != nil {
		t.Fatal(err)
	}
	r := o.Result
	for _, g := range guards {
		rep := r.Reports[g]
		t.Logf("%s %s/%s guard %s: %d grants in %.2fs (%.0f/s), errors %v, overlaps %d (incidents %d), stale accepted %d rejected %d, lost updates %d, regressions %d, linearizable %s",
			o.Info.Name, spec.Workload, loopName(spec), g, o.Acquired(), r.Elapsed.Seconds(), o.Throughput(), r.Metrics.Errors,
			rep.Overlaps, rep.Incidents, rep.StaleAccepted, rep.StaleRejected, rep.LostUpdates, rep.TokenRegressions, r.Linearizable.Result)
	}
	return o
}

// report is the overlap counter's report of a case run under one guard
// (or the first).
func report(o *Outcome) history.Report {
	for _, g := range judge.Guards {
		if r, ok := o.Result.Reports[g]; ok {
			return r
		}
	}
	return history.Report{}
}

func loopName(s Spec) string {
	if s.Rate > 0 {
		return "open"
	}
	return "closed"
}

func TestNoopShowsViolations(t *testing.T) {
	defer goleak.VerifyNone(t)
	// One case, every guard's store beside the others.
	o := run(t, Spec{Workload: Hot, Clients: 8, Hold: dist(t, "500us-1ms"), TTL: time.Second, Duration: 400 * time.Millisecond}, noops(t, 8), nil, judge.Guards...)
	for _, g := range judge.Guards {
		t.Run(string(g), func(t *testing.T) {
			s := o.Result.Reports[g]
			if s.Overlaps == 0 || s.Incidents == 0 || s.OverlapsLockBug != s.Overlaps {
				t.Fatalf("noop, 8 clients on one key: %d overlaps (%d lock bugs) in %d incidents of %d sections: want lock-bug overlaps",
					s.Overlaps, s.OverlapsLockBug, s.Incidents, s.Sections)
			}
			if o.Result.Linearizable.Result != results.NotLinearizable {
				t.Fatalf("noop judged %s by the mutex model", o.Result.Linearizable.Result)
			}
			if v := o.Result.LinearizableFenced; v.Result != results.Unknown || !strings.Contains(v.Reason, "no fencing tokens") {
				t.Fatalf("fenced model on noop: %+v", v)
			}
			if s.TokenRegressions != 0 {
				t.Fatalf("noop issues no tokens, yet %d regressions", s.TokenRegressions)
			}
			switch g {
			case judge.GuardNone, judge.GuardFence, judge.GuardFenceRW: // fencing cannot fence noop: it has no tokens
				if s.LostUpdates == 0 || s.StaleAccepted == 0 {
					t.Fatalf("guard %s: lost updates %d, stale accepted %d: want both > 0", g, s.LostUpdates, s.StaleAccepted)
				}
			case judge.GuardCAS:
				// The mark rejects the superseded writers that accessed the
				// key before their successor; one whose first access falls
				// between its successor's grant and first access marks over
				// it and lands: the CAS mark does not order writers.
				if s.StaleRejected == 0 || s.StaleAccepted*10 > s.StaleRejected {
					t.Fatalf("guard cas: stale accepted %d rejected %d: want most rejected", s.StaleAccepted, s.StaleRejected)
				}
			}
			if g.Fenced() && (s.Unfenced != s.Writes || !hasNote(o, g, "no fencing tokens")) {
				t.Fatalf("guard %s over noop: %d of %d writes unfenced, notes %q", g, s.Unfenced, s.Writes, o.notes(g))
			}
			if s.Writes != o.Acquired() || s.Sections != o.Acquired() || o.Result.Metrics.Acquired != o.Acquired() {
				t.Fatalf("%d grants on the judge's timeline, %d sections, %d writes, %d measured", o.Acquired(), s.Sections, s.Writes, o.Result.Metrics.Acquired)
			}
			if len(o.Result.Metrics.Errors) != 0 {
				t.Fatalf("errors %v", o.Result.Metrics.Errors)
			}
		})
	}
}

func hasNote(o *Outcome, g judge.Guard, s string) bool {
	return slices.ContainsFunc(o.notes(g), func(n string) bool { return strings.Contains(n, s) })
}

func TestRunStopsAtMaxOps(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, rate := range []float64{0, 5000} {
		t.Run(loopName(Spec{Rate: rate}), func(t *testing.T) {
			o := run(t, Spec{Workload: UniformKeys, Keys: 4, Clients: 4, Rate: rate, MaxOps: 300, Duration: time.Minute}, noops(t, 4), nil)
			if o.Acquired() != 300 || report(o).Sections != 300 {
				t.Fatalf("%d grants, %d sections; want 300 each", o.Acquired(), report(o).Sections)
			}
			if o.Result.Elapsed > 30*time.Second {
				t.Fatalf("300 noop ops took %v", o.Result.Elapsed)
			}
		})
	}
}

func TestRunStopsAtDuration(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, rate := range []float64{0, 200} {
		t.Run(loopName(Spec{Rate: rate}), func(t *testing.T) {
			began := time.Now()
			o := run(t, Spec{Workload: Hot, Clients: 3, Rate: rate, Hold: dist(t, "1ms"), Think: dist(t, "1ms"), Duration: 300 * time.Millisecond}, noops(t, 3), nil)
			took := time.Since(began)
			// How long past its duration the last section takes to end
			// depends on the machine: only a run that went on for ever
			// (10 s) is wrong.
			if e := o.Result.Elapsed; e < 300*time.Millisecond || e > 10*time.Second || o.Result.Stopped != "" {
				t.Fatalf("elapsed %v, stopped %q; want the 300ms duration", e, o.Result.Stopped)
			}
			if took > 10*time.Second {
				t.Fatalf("the case returned %v after its start, for a 300ms run", took)
			}
			if o.Acquired() == 0 {
				t.Fatal("no grants")
			}
		})
	}
}

func TestRunStopsOnContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	o, err := runCase(ctx, newJudge(t), Spec{Workload: Hot, Clients: 2, Hold: dist(t, "1ms"), Duration: time.Minute}, []judge.Guard{judge.GuardNone}, noops(t, 2), nil)
	if !errors.Is(err, context.DeadlineExceeded) || o == nil || o.Result.Stopped == "" {
		t.Fatalf("case = %+v, %v; want the partial outcome and the context's error", o, err)
	}
	if o.Result.Elapsed > 5*time.Second || o.Acquired() == 0 || !hasNote(o, judge.GuardNone, "partial results") {
		t.Fatalf("interrupted case: elapsed %v, %d grants, notes %q", o.Result.Elapsed, o.Acquired(), o.notes(judge.GuardNone))
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	ctx := context.Background()
	spec := Spec{Workload: Hot, Clients: 2, Duration: time.Second}
	for name, tc := range map[string]struct {
		spec    Spec
		clients []Client
		want    string
	}{
		"bad spec":        {Spec{Workload: "warm", Clients: 2}, make([]Client, 2), `"warm"`},
		"too few clients": {spec, make([]Client, 1), "1 clients for a spec of 2"},
		"no judge line":   {spec, []Client{{Locker: noop.New()}, {}}, "no Locker or no judge line"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := Run(ctx, tc.spec, tc.clients); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v; want ErrSpec naming %s", err, tc.want)
			}
		})
	}
}

func TestRunStopsWhenTheBackendRefusesTheSpec(t *testing.T) {
	defer goleak.VerifyNone(t)
	ls := noops(t, 2)
	ls[1].Close() // a closed Locker refuses everything
	o, err := runCase(context.Background(), newJudge(t), Spec{Workload: Hot, Clients: 2, Duration: time.Minute}, []judge.Guard{judge.GuardNone}, ls, nil)
	if !errors.Is(err, locker.ErrClosed) || o == nil || o.Result.Elapsed > 10*time.Second {
		t.Fatalf("case over a closed Locker = %+v, %v; want an early stop wrapping ErrClosed", o, err)
	}
}

// TestScheduleKeepsItsRate: the open loop's arrivals come at the rate
// asked for whoever serves them: 400/s for 1.5 s is 600 arrivals of a
// Poisson process (standard deviation 24.5), in time order, drawn from
// the seed alone (not from when a client takes them), and MaxOps caps
// them.
func TestScheduleKeepsItsRate(t *testing.T) {
	const rate, d = 400, 1500 * time.Millisecond
	start := time.Now()
	arrivals := func(seed uint64, maxOps int64) []time.Duration {
		s := newSchedule(start, rate, maxOps, rand.New(rand.NewPCG(seed, 0x5eed)))
		var got []time.Duration
		for {
			at, ok := s.next(start.Add(d))
			if !ok {
				return got
			}
			if !at.Before(start.Add(d)) || (len(got) > 0 && at.Sub(start) < got[len(got)-1]) {
				t.Fatalf("arrival at %v after %v: out of order or past the %v run", at.Sub(start), got, d)
			}
			got = append(got, at.Sub(start))
		}
	}
	for seed := range uint64(20) {
		n := len(arrivals(seed, 0))
		if n < 600-5*25 || n > 600+5*25 {
			t.Fatalf("seed %d: %d arrivals in %v at %d/s, want 600 ± 5 standard deviations", seed, n, d, rate)
		}
	}
	if a, b := arrivals(7, 0), arrivals(7, 0); !slices.Equal(a, b) {
		t.Fatal("the same seed drew other arrivals")
	}
	if n := len(arrivals(7, 100)); n != 100 {
		t.Fatalf("MaxOps 100 let %d arrivals through", n)
	}
}

// TestOpenLoopKeepsItsRate: an open loop at 400/s over a lock that takes
// no time grants no more than its arrivals (600 ± 5 standard deviations
// in 1.5 s). How many fewer depends on how fast the machine serves them,
// which is not the loop's to promise: TestScheduleKeepsItsRate checks the
// arrivals themselves.
func TestOpenLoopKeepsItsRate(t *testing.T) {
	defer goleak.VerifyNone(t)
	const rate = 400
	o := run(t, Spec{Workload: UniformKeys, Keys: 16, Clients: 4, Rate: rate, Hold: dist(t, "1ms"), Duration: 1500 * time.Millisecond}, noops(t, 4), nil)
	if n := o.Acquired(); n == 0 || n > 600+5*25 {
		t.Fatalf("open loop at %d/s for 1.5s granted %d sections, want some and at most 725", rate, n)
	}
}

// TestOpenLoopCountsQueueing overloads one client: 100 arrivals per
// second for a client that can serve 20. A closed loop would report the
// 50 ms hold as its whole story; the open loop must show the queue.
func TestOpenLoopCountsQueueing(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := run(t, Spec{Workload: Hot, Clients: 1, Rate: 100, Hold: dist(t, "50ms"), Duration: time.Second}, noops(t, 1), nil)
	h, err := results.Decode(o.Result.Metrics.Histograms.Acquire)
	if err != nil {
		t.Fatal(err)
	}
	if p := results.Summarise(h); p.Max < 200_000 {
		t.Fatalf("overloaded open loop: acquire latency max %d µs; the queueing is hidden", p.Max)
	}
}

func TestZipfConcentratesOnFewKeys(t *testing.T) {
	defer goleak.VerifyNone(t)
	byRank := func(o *Outcome, spec Spec) []int64 {
		spec.KeyPrefix = o.Result.KeyPrefix // the keys as the case ran them
		var g []int64
		for _, k := range spec.KeyNames() {
			g = append(g, report(o).Grants[k])
		}
		return g
	}
	share := func(g []int64) float64 {
		g = slices.Clone(g)
		slices.Sort(g)
		slices.Reverse(g)
		var all int64
		for _, n := range g {
			all += n
		}
		return float64(g[0]+g[1]+g[2]) / float64(all)
	}
	spec := Spec{Workload: Zipf, Keys: 100, Clients: 2, MaxOps: 4000, Duration: time.Minute, Seed: 7}
	z := byRank(run(t, spec, noops(t, 2), nil), spec)
	spec.Workload = UniformKeys
	u := byRank(run(t, spec, noops(t, 2), nil), spec)
	// P(rank k) ∝ (1+k)^-1.1 over 100 keys puts 41% on the top 3.
	if s := share(z); s < 0.3 || z[0] != slices.Max(z) {
		t.Fatalf("zipf: top 3 of 100 keys got %.0f%% of the grants, rank 0 got %d of max %d", 100*s, z[0], slices.Max(z))
	}
	if s := share(u); s > 0.1 {
		t.Fatalf("uniform: top 3 of 100 keys got %.0f%% of the grants", 100*s)
	}
	t.Logf("top 3 of 100 keys: zipf %.0f%%, uniform %.0f%%", 100*share(z), 100*share(u))
}

// TestSectionHook: the judge asks the section hook about every grant, with
// the grant's key, time and validity, and a longer hold it answers is
// held.
func TestSectionHook(t *testing.T) {
	defer goleak.VerifyNone(t)
	var sections atomic.Int64
	long := everyNth(50, judge.Action{Hold: 300 * time.Millisecond})
	section := func(e judge.SectionEvent) judge.Action {
		sections.Add(1)
		if e.Key == "" || e.Granted < 0 || e.ValidFor <= 0 || e.ValidFor > locker.DefaultTTL {
			t.Errorf("bad section event %+v", e)
		}
		return long(e)
	}
	o := run(t, Spec{Workload: Hot, Clients: 2, Hold: dist(t, "1ms"), MaxOps: 60, Duration: 5 * time.Second}, noops(t, 2), section)
	if o.Acquired() != 60 || o.Result.Elapsed < 300*time.Millisecond {
		t.Fatalf("%d grants after %v: want 60, after the 300ms hold", o.Acquired(), o.Result.Elapsed)
	}
	if report(o).Writes != o.Acquired() || sections.Load() != o.Acquired() {
		t.Fatalf("%d grants, %d hook calls, %d writes", o.Acquired(), sections.Load(), report(o).Writes)
	}
	h, _ := results.Decode(o.Result.Metrics.Histograms.Hold)
	if h.Max() < 300_000 {
		t.Fatalf("longest hold %d µs: the hook's 300ms hold was not applied", h.Max())
	}
}

func TestCases(t *testing.T) {
	defer goleak.VerifyNone(t)
	spec := Spec{Workload: UniformKeys, Keys: 8, Clients: 2, Hold: dist(t, "1ms"), TTL: 2 * time.Second, MaxOps: 100, Duration: time.Minute}
	o := run(t, spec, noops(t, 2), nil, judge.GuardFence, judge.GuardNone)
	base := results.Case{Fault: "none", Trial: 3, Notes: make([]string, 0, 8)} // room to share, if Cases shared it
	spec.Describe(&base)
	cs, err := o.Cases(base, []judge.Guard{judge.GuardFence, judge.GuardNone})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Guard != "fence" || cs[1].Guard != "none" || len(base.Notes) != 0 {
		t.Fatalf("cases %+v from base %+v: want fence then none, the base untouched", cs, base)
	}
	if !slices.Equal(cs[0].Notes, o.notes(judge.GuardFence)) || !slices.Equal(cs[1].Notes, o.notes(judge.GuardNone)) {
		t.Fatalf("notes %q and %q: want each guard's own", cs[0].Notes, cs[1].Notes)
	}
	if _, err := o.Cases(base, []judge.Guard{judge.GuardCAS}); err == nil {
		t.Fatal("Cases of a guard the case did not run returned no error")
	}
	c := cs[0]
	// noop issues no tokens: its fence-guarded case ran without a token check.
	if c.Backend != "noop" || c.Workload != "uniform" || c.Guard != "fence" || c.Fencing || c.Clients != 2 || c.Keys != 8 ||
		c.TTLMillis != 2000 || c.Fault != "none" || c.Trial != 3 || c.Acquired != 100 || c.Throughput <= 0 || c.DurationS <= 0 ||
		c.ClientsAs != results.ClientsGoroutines {
		t.Fatalf("case settings not filled: %+v", c)
	}
	if c.Linearizable != results.NotLinearizable || c.LinearizableFenced != results.Unknown || c.LinearizableFencedReason == "" {
		t.Fatalf("verdicts: mutex %s, fenced %s (%s)", c.Linearizable, c.LinearizableFenced, c.LinearizableFencedReason)
	}
	if c.Errors == nil || c.FaultWindows == nil || len(c.Timeline) == 0 || c.TimelineStepS <= 0 {
		t.Fatalf("case collections not filled: errors %v windows %v timeline %v", c.Errors, c.FaultWindows, c.Timeline)
	}
	var grants int64
	for _, n := range c.Timeline {
		grants += n
	}
	if grants != c.Acquired {
		t.Fatalf("timeline holds %d grants of %d", grants, c.Acquired)
	}
	h, err := results.Decode(c.Histograms.Hold)
	if err != nil || h.TotalCount() != 100 || c.HoldUS.P50 < 1000 {
		t.Fatalf("hold histogram: %v, %v; p50 %d µs", h, err, c.HoldUS.P50)
	}
	if !hasNote(o, judge.GuardFence, "no fencing tokens") {
		t.Fatalf("notes %q", c.Notes)
	}
}

// TestDescribe checks that a load is described by its settings, and that
// a hold that can reach the TTL is said before the case runs.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		note bool
	}{
		{Spec{Workload: Zipf, Keys: 100, Clients: 16, Rate: 500, Hold: dist(t, "1ms-5ms"), TTL: time.Second}, false},
		{Spec{Workload: Hot, Clients: 2, Hold: dist(t, "exp:100ms"), TTL: time.Second}, true}, // capped at 50 means: 5s
	} {
		s, err := tc.spec.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		var c results.Case
		s.Describe(&c)
		if c.Workload != string(s.Workload) || c.Keys != s.Keys || c.Clients != s.Clients || c.TTLMillis != 1000 || c.TargetRate != s.Rate {
			t.Errorf("%+v described as %+v", s, c)
		}
		if got := slices.ContainsFunc(c.Notes, func(n string) bool { return strings.Contains(n, "can reach the TTL") }); got != tc.note {
			t.Errorf("hold %v, TTL %v: notes %q, want the hold note: %v", s.Hold, s.TTL, c.Notes, tc.note)
		}
	}
}

func TestCharge(t *testing.T) {
	w := []results.Window{{StartS: 1, EndS: 1.5}, {StartS: 2, EndS: 2.5}, {StartS: 3, EndS: 3.5}}
	s := func(x float64) int64 { return int64(x * 1e9) }
	targets := make([]results.Target, 3)
	for _, tc := range []struct {
		name      string
		incidents []history.Episode
		stale     []int64
		want      [3][4]int64 // per injection: incidents, lock bugs, ambiguous, stale accepted
	}{
		{name: "nothing"},
		{name: "three incidents after the first injection are its own",
			incidents: []history.Episode{{Start: s(1.2), Class: history.LockBug}, {Start: s(1.3), Class: history.ExpiredHolder}, {Start: s(1.9), Class: history.Ambiguous}},
			want:      [3][4]int64{{3, 1, 1, 0}}},
		{name: "one before any injection is charged to the first",
			incidents: []history.Episode{{Start: s(0.5), Class: history.ExpiredHolder}, {Start: s(2.1), Class: history.ExpiredHolder}},
			stale:     []int64{s(2.2), s(3.9)},
			want:      [3][4]int64{{1, 0, 0, 0}, {1, 0, 0, 1}, {0, 0, 0, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := charge(targets, w, history.Report{Episodes: tc.incidents, StaleAcceptedAt: tc.stale})
			for i, g := range got {
				if x := [4]int64{g.Incidents, g.IncidentsLockBug, g.IncidentsAmbiguous, g.StaleAccepted}; x != tc.want[i] || g.AtS != w[i].StartS {
					t.Errorf("injection %d at %v s: %v, want %v at %v s", i+1, g.AtS, x, tc.want[i], w[i].StartS)
				}
			}
		})
	}
}
