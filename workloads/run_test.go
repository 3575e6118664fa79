package workloads

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends/noop"
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

// run runs spec over lockers with a fresh resource guarded by g, and
// fails t on an error.
func run(t *testing.T, spec Spec, lockers []locker.Locker, g Guard, hooks Hooks) *Outcome {
	t.Helper()
	res, err := NewResource(g)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := Run(ctx, spec, lockers, res, hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s/%s guard %s: %d grants in %.2fs (%.0f/s), errors %v, overlaps %d, stale accepted %d rejected %d, lost updates %d, regressions %d",
		o.Info.Name, o.Spec.Workload, loopName(o.Spec), o.Guard, o.Acquired, o.Elapsed.Seconds(), o.Throughput(), o.Errors,
		o.Safety.Overlaps, o.Safety.StaleAccepted, o.Safety.StaleRejected, o.Safety.LostUpdates, o.Safety.TokenRegressions)
	return o
}

func loopName(s Spec) string {
	if s.Rate > 0 {
		return "open"
	}
	return "closed"
}

func TestNoopShowsViolations(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, g := range []Guard{GuardNone, GuardFence, GuardCAS} {
		t.Run(string(g), func(t *testing.T) {
			o := run(t, Spec{Workload: Hot, Clients: 8, Hold: dist(t, "500us-1ms"), TTL: time.Second, Duration: 400 * time.Millisecond}, noops(t, 8), g, Hooks{})
			s := o.Safety
			if s.Overlaps == 0 {
				t.Fatalf("noop, 8 clients on one key: no overlap in %d sections", s.Sections)
			}
			if s.TokenRegressions != 0 {
				t.Fatalf("noop issues no tokens, yet %d regressions", s.TokenRegressions)
			}
			switch g {
			case GuardNone, GuardFence: // fence cannot fence noop: it has no tokens
				if s.LostUpdates == 0 || s.StaleAccepted == 0 {
					t.Fatalf("guard %s: lost updates %d, stale accepted %d: want both > 0", g, s.LostUpdates, s.StaleAccepted)
				}
			case GuardCAS: // the mark rejects every superseded writer
				if s.StaleAccepted != 0 || s.StaleRejected == 0 || s.LostUpdates != 0 {
					t.Fatalf("guard cas: stale accepted %d rejected %d, lost %d: want 0, > 0, 0", s.StaleAccepted, s.StaleRejected, s.LostUpdates)
				}
			}
			if g == GuardFence && (s.Unfenced != s.Writes || !hasNote(o, "no fencing tokens")) {
				t.Fatalf("guard fence over noop: %d of %d writes unfenced, notes %q", s.Unfenced, s.Writes, o.Notes)
			}
			if s.Writes != o.Acquired || s.Sections != o.Acquired {
				t.Fatalf("%d grants but %d sections and %d writes", o.Acquired, s.Sections, s.Writes)
			}
			if len(o.Errors) != 0 {
				t.Fatalf("errors %v", o.Errors)
			}
		})
	}
}

func hasNote(o *Outcome, s string) bool {
	return slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, s) })
}

func TestRunStopsAtMaxOps(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, rate := range []float64{0, 5000} {
		t.Run(loopName(Spec{Rate: rate}), func(t *testing.T) {
			o := run(t, Spec{Workload: UniformKeys, Keys: 4, Clients: 4, Rate: rate, MaxOps: 300, Duration: time.Minute}, noops(t, 4), GuardNone, Hooks{})
			if o.Stopped != StopMaxOps || o.Ops != 300 || o.Acquired != 300 || o.Safety.Sections != 300 {
				t.Fatalf("stopped by %s after %d ops, %d grants, %d sections; want max-ops, 300 each", o.Stopped, o.Ops, o.Acquired, o.Safety.Sections)
			}
			if o.Elapsed > 30*time.Second {
				t.Fatalf("300 noop ops took %v", o.Elapsed)
			}
		})
	}
}

func TestRunStopsAtDuration(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, rate := range []float64{0, 200} {
		t.Run(loopName(Spec{Rate: rate}), func(t *testing.T) {
			began := time.Now()
			o := run(t, Spec{Workload: Hot, Clients: 3, Rate: rate, Hold: dist(t, "1ms"), Think: dist(t, "1ms"), Duration: 300 * time.Millisecond}, noops(t, 3), GuardNone, Hooks{})
			took := time.Since(began)
			if o.Stopped != StopDuration || o.Elapsed < 300*time.Millisecond || o.Elapsed > time.Second {
				t.Fatalf("stopped by %s after %v; want duration, 300ms", o.Stopped, o.Elapsed)
			}
			if took > 5*time.Second {
				t.Fatalf("Run returned %v after its start, for a 300ms run", took)
			}
			if o.Acquired == 0 {
				t.Fatal("no grants")
			}
		})
	}
}

func TestRunStopsOnContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	o, err := Run(ctx, Spec{Workload: Hot, Clients: 2, Hold: dist(t, "1ms"), Duration: time.Minute}, noops(t, 2), nil, Hooks{})
	if !errors.Is(err, context.DeadlineExceeded) || o == nil || o.Stopped != StopContext {
		t.Fatalf("Run = %+v, %v; want the partial outcome and the context's error", o, err)
	}
	if o.Elapsed > 5*time.Second || o.Acquired == 0 || !hasNote(o, "interrupted") {
		t.Fatalf("interrupted run: elapsed %v, %d grants, notes %q", o.Elapsed, o.Acquired, o.Notes)
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	ctx := context.Background()
	spec := Spec{Workload: Hot, Clients: 2, Duration: time.Second}
	used, _ := NewResource(GuardNone)
	sec := used.Begin(Grant{Key: "k"})
	sec.End()
	for name, tc := range map[string]struct {
		spec    Spec
		lockers []locker.Locker
		res     *Resource
		want    string
	}{
		"bad spec":        {Spec{Workload: "warm", Clients: 2}, noops(t, 2), nil, `"warm"`},
		"too few lockers": {spec, noops(t, 1), nil, "1 lockers for 2 clients"},
		"nil locker":      {spec, []locker.Locker{noop.New(), nil}, nil, "locker 1 of 2 is nil"},
		"used resource":   {spec, noops(t, 2), used, "already saw 1 sections"},
	} {
		t.Run(name, func(t *testing.T) {
			o, err := Run(ctx, tc.spec, tc.lockers, tc.res, Hooks{})
			if o != nil || !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, %v; want ErrInvalid naming %s", o, err, tc.want)
			}
		})
	}
}

func TestRunStopsWhenTheBackendRefusesTheSpec(t *testing.T) {
	defer goleak.VerifyNone(t)
	ls := noops(t, 2)
	ls[1].Close() // a closed Locker refuses everything
	o, err := Run(context.Background(), Spec{Workload: Hot, Clients: 2, Duration: time.Minute}, ls, nil, Hooks{})
	if !errors.Is(err, locker.ErrClosed) || o == nil || o.Stopped != StopFatal || o.Elapsed > 10*time.Second {
		t.Fatalf("Run over a closed Locker = %+v, %v; want a fatal stop wrapping ErrClosed", o, err)
	}
}

func TestOpenLoopKeepsItsRate(t *testing.T) {
	defer goleak.VerifyNone(t)
	const rate = 400
	o := run(t, Spec{Workload: UniformKeys, Keys: 16, Clients: 4, Rate: rate, Hold: dist(t, "1ms"), Duration: 1500 * time.Millisecond}, noops(t, 4), GuardNone, Hooks{})
	if got := o.Throughput(); got < 0.6*rate || got > 1.4*rate {
		t.Fatalf("open loop at %d/s granted %.0f/s", rate, got)
	}
	if o.Missed > rate/5 {
		t.Fatalf("open loop missed %d arrivals with idle clients", o.Missed)
	}
}

// TestOpenLoopCountsQueueing overloads one client: 100 arrivals per
// second for a client that can serve 20. A closed loop would report the
// 50 ms hold as its whole story; the open loop must show the queue.
func TestOpenLoopCountsQueueing(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := run(t, Spec{Workload: Hot, Clients: 1, Rate: 100, Hold: dist(t, "50ms"), Duration: time.Second}, noops(t, 1), GuardNone, Hooks{})
	p := results.Summarise(o.Acquire)
	if p.Max < 200_000 {
		t.Fatalf("overloaded open loop: acquire latency max %d µs; the queueing is hidden", p.Max)
	}
	if o.Missed < 40 || !hasNote(o, "not started") {
		t.Fatalf("overloaded open loop: %d missed arrivals (want about 80), notes %q", o.Missed, o.Notes)
	}
}

func TestZipfConcentratesOnFewKeys(t *testing.T) {
	defer goleak.VerifyNone(t)
	share := func(o *Outcome) float64 {
		g := slices.Clone(o.KeyGrants)
		slices.Sort(g)
		slices.Reverse(g)
		return float64(g[0]+g[1]+g[2]) / float64(o.Acquired)
	}
	spec := Spec{Workload: Zipf, Keys: 100, Clients: 2, MaxOps: 4000, Duration: time.Minute, Seed: 7}
	z := run(t, spec, noops(t, 2), GuardNone, Hooks{})
	spec.Workload = UniformKeys
	u := run(t, spec, noops(t, 2), GuardNone, Hooks{})
	// P(rank k) ∝ (1+k)^-1.1 over 100 keys puts 41% on the top 3.
	if s := share(z); s < 0.3 || z.KeyGrants[0] != slices.Max(z.KeyGrants) {
		t.Fatalf("zipf: top 3 of 100 keys got %.0f%% of the grants, rank 0 got %d of max %d", 100*s, z.KeyGrants[0], slices.Max(z.KeyGrants))
	}
	if s := share(u); s > 0.1 {
		t.Fatalf("uniform: top 3 of 100 keys got %.0f%% of the grants", 100*s)
	}
	t.Logf("top 3 of 100 keys: zipf %.0f%%, uniform %.0f%%", 100*share(z), 100*share(u))
}

func TestHooks(t *testing.T) {
	defer goleak.VerifyNone(t)
	var nemesisStart time.Time
	var sections atomic.Int64
	stall := EveryNth(50, Stall{For: 300 * time.Millisecond, At: BeforeWrite, Label: "pause"})
	hooks := Hooks{
		Section: func(i SectionInfo) Stall {
			sections.Add(1)
			if i.Lease == nil || i.Key == "" || i.Hold != time.Millisecond || i.Granted < 0 {
				t.Errorf("bad section info %+v", i)
			}
			return stall(i)
		},
		Nemesis: func(ctx context.Context, f *Faults) {
			nemesisStart = f.Start()
			f.Begin("until the end") // never closed here: Run closes it
			if err := f.Record("backwards", f.Start().Add(time.Second), f.Start()); !errors.Is(err, locker.ErrInvalid) {
				t.Errorf("Record of a window ending before it starts: %v", err)
			}
			if f.At(ctx, 100*time.Millisecond) {
				done := f.Begin("kill")
				f.Fail(nil) // nothing to record
				f.Fail(errors.New("node-3 would not die"))
				done()
				done() // a second call does nothing
			}
			<-ctx.Done()
		},
	}
	o := run(t, Spec{Workload: Hot, Clients: 2, Hold: dist(t, "1ms"), MaxOps: 60, Duration: 5 * time.Second}, noops(t, 2), GuardNone, hooks)
	if o.Stopped != StopMaxOps || o.Elapsed < 300*time.Millisecond {
		t.Fatalf("stopped by %s after %v: want max-ops, after the 300ms stall", o.Stopped, o.Elapsed)
	}
	if o.Safety.Writes != o.Acquired || sections.Load() != o.Acquired {
		t.Fatalf("%d grants, %d hook calls, %d writes", o.Acquired, sections.Load(), o.Safety.Writes)
	}
	if !nemesisStart.Equal(o.Start) {
		t.Fatalf("nemesis saw start %v, outcome %v", nemesisStart, o.Start)
	}
	labels := map[string]results.Window{}
	for _, w := range o.Windows {
		labels[w.Label] = w
		if w.EndS < w.StartS {
			t.Fatalf("window %+v ends before it starts", w)
		}
	}
	if len(o.Windows) != 3 {
		t.Fatalf("windows %+v: want the pause, the kill and the open one", o.Windows)
	}
	if w, ok := labels["kill"]; !ok || w.StartS < 0.1 {
		t.Fatalf("kill window %+v: want one starting at 100ms", w)
	}
	if w, ok := labels["until the end"]; !ok || w.StartS > 0.05 || w.EndS < 0.2 {
		t.Fatalf("open window %+v not closed at the end", w)
	}
	if len(o.FaultFailures) != 1 || !slices.ContainsFunc(o.Notes, func(n string) bool {
		return strings.HasPrefix(n, "fault not injected as planned, at 0.1") && strings.HasSuffix(n, "node-3 would not die")
	}) {
		t.Fatalf("fault failures %q, notes %q: want the one failure, timed, in a note", o.FaultFailures, o.Notes)
	}
	var pause results.Window
	for l, w := range labels {
		if strings.HasPrefix(l, "pause client ") {
			pause = w
		}
	}
	if d := pause.EndS - pause.StartS; d < 0.3 || d > 1 {
		t.Fatalf("pause window %+v: want 300ms", pause)
	}
}

func TestFill(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := run(t, Spec{Workload: UniformKeys, Keys: 8, Clients: 2, Hold: dist(t, "1ms"), TTL: 2 * time.Second, MaxOps: 100, Duration: time.Minute}, noops(t, 2), GuardFence, Hooks{})
	c := results.Case{Fault: "none", Trial: 3}
	if err := o.Fill(&c); err != nil {
		t.Fatal(err)
	}
	if c.Backend != "noop" || c.Workload != "uniform" || c.Guard != "fence" || !c.Fencing || c.Clients != 2 || c.Keys != 8 ||
		c.TTLMillis != 2000 || c.Fault != "none" || c.Trial != 3 || c.Acquired != 100 || c.Throughput <= 0 || c.DurationS <= 0 {
		t.Fatalf("case settings not filled: %+v", c)
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
	if !hasNote(o, "no fencing tokens") || len(c.Notes) != len(o.Notes) {
		t.Fatalf("notes %q", c.Notes)
	}
}

// TestStallOutlivesTheLoad: a paused holder is not woken early when the
// load stops, whether by its duration or by the caller's context, and its
// write is made: waking it early would hide the stale write.
func TestStallOutlivesTheLoad(t *testing.T) {
	defer goleak.VerifyNone(t)
	first := func(i SectionInfo) Stall {
		if i.Seq != 1 {
			return Stall{}
		}
		return Stall{For: 400 * time.Millisecond, At: BeforeWrite, Label: "pause"}
	}
	for _, tc := range []struct {
		name     string
		duration time.Duration
		ctx      time.Duration
		stopped  string
	}{
		{"duration", 100 * time.Millisecond, time.Minute, StopDuration},
		{"context", time.Minute, 100 * time.Millisecond, StopContext},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			began := time.Now()
			o, err := Run(ctx, Spec{Workload: Hot, Clients: 2, Hold: dist(t, "1ms"), Duration: tc.duration}, noops(t, 2), nil, Hooks{Section: first})
			took := time.Since(began)
			if o == nil || o.Stopped != tc.stopped || (tc.stopped == StopContext) != (err != nil) {
				t.Fatalf("Run = %+v, %v; want stopped by %s", o, err, tc.stopped)
			}
			if took < 400*time.Millisecond {
				t.Fatalf("Run returned after %v: the 400ms stall was cut short", took)
			}
			if o.Elapsed >= 390*time.Millisecond {
				t.Fatalf("measured duration %v includes the drain after the 100ms stop", o.Elapsed)
			}
			if o.Safety.Writes != o.Acquired {
				t.Fatalf("%d grants, %d writes: the stalled section did not write", o.Acquired, o.Safety.Writes)
			}
			if len(o.Windows) != 1 || o.Windows[0].EndS-o.Windows[0].StartS < 0.4 {
				t.Fatalf("windows %+v: want the 400ms pause", o.Windows)
			}
		})
	}
}
