package workloads

import (
	"fmt"
	"maps"
	"slices"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// Outcome is what one case measured: the judge's result (safety of every
// client, history, timeline, this host's metrics), the nemesis's record
// of its injections and how the clients ran. Cases turns it into the
// case's results, one per guard.
type Outcome struct {
	// Info describes the backend.
	Info locker.Info
	// Declared, when set, is the contract the backend's descriptor
	// declares for the case (backends.Descriptor.Contract): the results
	// record it, and the promise, from it rather than from Info.
	Declared *locker.Info
	// ClientsAs is results.ClientsProcesses or results.ClientsGoroutines.
	ClientsAs string
	// Result is the judge's.
	Result *judge.Result
	// Windows are the fault windows the nemesis recorded, from the case
	// start.
	Windows []results.Window
	// Targets are what each injection hit (one per injection).
	Targets []results.Target
	// FaultFailures are the nemesis's failures to inject its fault.
	FaultFailures []string
	// Notes explain the numbers (results.Case.Notes), on top of those
	// Fill derives.
	Notes []string
}

// Acquired is this host's grants, counted by the judge.
func (o *Outcome) Acquired() int64 {
	var n int64
	for _, x := range o.Result.Timeline {
		n += x
	}
	return n
}

// Throughput is this host's grants per second over the measured
// duration.
func (o *Outcome) Throughput() float64 {
	if o.Result.Elapsed <= 0 {
		return 0
	}
	return float64(o.Acquired()) / o.Result.Elapsed.Seconds()
}

// Describe writes the settings of the load s (as it ran: normalized)
// into c, a case's record before it is measured — workload, clients,
// keys, TTL, target rate — and the notes the load alone implies. A
// runner describes its case this way whether it records the results
// itself or a judge of its own records them (judge.CaseSpec.Record).
func (s Spec) Describe(c *results.Case) {
	c.Workload = string(s.Workload)
	c.Clients = s.Clients
	c.Keys = s.Keys
	c.TTLMillis = s.TTL.Milliseconds()
	c.TargetRate = s.Rate
	c.Hold, c.Load, c.HoldLeft, c.HoldForMS = s.Hold.String(), s.Load(), s.HoldLeft, s.HoldFor.Milliseconds()
	switch {
	case s.HoldFor > 0 && s.AutoExtend:
		c.Notes = append(c.Notes, fmt.Sprintf("each holder holds %v (%.3g TTLs) after its first access while its lease's watchdog "+
			"extends it every TTL/3; "+
			"it checks its lease before it writes (lease-end ops say whether it was told)", s.HoldFor, float64(s.HoldFor)/float64(s.TTL)))
	case s.HoldFor > 0:
		c.Notes = append(c.Notes, fmt.Sprintf("each holder holds %v after its first access, without extending its lease (TTL "+
			"%v)", s.HoldFor, s.TTL))
	case s.HoldLeft > 0:
		c.Notes = append(c.Notes, fmt.Sprintf("each holder holds a random fraction, up to %g, of the validity its lease has left after its "+
			"first access: a lease that claims more than its lock keeps is caught", s.HoldLeft))
	case s.AutoExtend && s.Hold.Max() >= s.TTL:
		c.Notes = append(c.Notes, fmt.Sprintf("holders hold %v, beyond the TTL %v, while their lease's watchdog extends it "+
			"every TTL/3", s.Hold, s.TTL))
	case s.Hold.Max() >= s.TTL:
		c.Notes = append(c.Notes, fmt.Sprintf("hold time %v can reach the TTL %v: holders may outlive their leases without "+
			"any fault", s.Hold, s.TTL))
	}
}

// Cases turns the outcome into the case's results, one per guard: each
// starts from base, the record of what ran (Spec.Describe and the
// runner's own fields: backend, fault, trial, host, durability, seed),
// and is filled as that guard's store saw the case (Fill). It is the one
// place a judged case becomes results, for a runner and for a judge of
// its own alike.
func (o *Outcome) Cases(base results.Case, guards []judge.Guard) ([]results.Case, error) {
	cs := make([]results.Case, 0, len(guards))
	for _, g := range guards {
		c := base
		c.Notes = slices.Clone(base.Notes)
		if err := o.Fill(&c, g); err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// Fill writes the outcome, as the store of guard saw it, into c, which
// already describes what ran (Spec.Describe): the guard, the backend's
// facts, the measurements, the safety counts and verdicts, the timeline,
// the fault windows, injections and their targets, the availability
// under the faults, the rate bound on incidents per injection, the
// encoded histograms and the notes (appended). A fault that failed to
// inject makes the case invalid. It leaves the fields it cannot know —
// the load's settings, Fault, Trial, Host, Durability — and Backend when
// already set (the name the backend was opened by).
func (o *Outcome) Fill(c *results.Case, guard judge.Guard) error {
	r := o.Result
	s, ok := r.Reports[guard]
	if !ok {
		return locker.Invalidf("guard %s: the case ran the resource under %v only", guard, slices.Sorted(maps.Keys(r.Reports)))
	}
	if c.Backend == "" {
		c.Backend = o.Info.Name
	}
	c.Guard = string(guard)
	// The resource checked tokens only if the backend issued them.
	c.Fencing = guard.Fenced() && o.Info.Fencing
	c.ClientsAs = o.ClientsAs
	c.DurationS = r.Elapsed.Seconds()
	c.Nodes = len(o.Info.Nodes)
	c.Quorum = o.Info.Quorum
	c.Guarantee = o.Info.Guarantee
	ttl := time.Duration(c.TTLMillis) * time.Millisecond // as Describe recorded it
	c.PromiseMS, c.MaxValidityMS = ms(o.Info.Promise(ttl)), ms(o.Info.MaxValidity(ttl))
	if d := c.Contract; d != nil && o.Declared == nil { // declared in the record (a judge of its own)
		c.PromiseMS, c.MaxValidityMS = float64(d.PromiseNS)/1e6, float64(d.MaxValidityNS)/1e6
		c.PromiseDepartures = r.Departures.N
	}
	if d := o.Declared; d != nil {
		c.PromiseMS, c.MaxValidityMS = ms(d.Promise(ttl)), ms(d.MaxValidity(ttl))
		c.Contract = &results.Contract{PromiseNS: int64(d.Promise(ttl)), MaxValidityNS: int64(d.MaxValidity(ttl)),
			DriftRate: d.DriftRate, DriftMS: ms(d.Drift)}
		c.PromiseDepartures = r.Departures.N
		for _, e := range r.Departures.Examples {
			c.Notes = append(c.Notes, "a worker reported a promise other than the backend declares: "+e)
		}
	}

	m := r.Metrics
	c.Acquired = o.Acquired()
	c.Throughput = o.Throughput()
	c.Errors = make(map[string]int64, len(m.Errors))
	for k, v := range m.Errors {
		c.Errors[k] = v
	}
	c.Histograms = m.Histograms
	for _, x := range []struct {
		enc string
		to  *results.Percentiles
	}{{m.Histograms.Acquire, &c.LatencyUS}, {m.Histograms.Hold, &c.HoldUS}, {m.Histograms.Release, &c.ReleaseUS}} {
		h, err := results.Decode(x.enc)
		if err != nil {
			return fmt.Errorf("decode histogram: %w", err)
		}
		*x.to = results.Summarise(h)
	}

	c.Overlaps, c.OverlapsLockBug, c.OverlapsExpiredHolder, c.OverlapsAmbiguous = s.Overlaps, s.OverlapsLockBug,
		s.OverlapsExpiredHolder, s.OverlapsAmbiguous
	c.Incidents, c.IncidentsLockBug, c.IncidentsExpiredHolder, c.IncidentsAmbiguous = s.Incidents, s.IncidentsLockBug,
		s.IncidentsExpiredHolder, s.IncidentsAmbiguous
	c.ContendedGrants = s.ContendedGrants
	c.AmbiguousWidthMaxMS, c.RoundTripMS, c.OverlapsAmbiguousWide = ms(time.Duration(s.AmbiguousWidthMax)),
		ms(time.Duration(s.RoundTrip)), s.OverlapsAmbiguousWide
	c.LeaseEnds, c.StaleTold, c.StaleSilent = s.LeaseEnds, s.StaleTold, s.StaleSilent
	c.ValidityShort, c.ValidityLong = s.ValidityShort, s.ValidityLong
	c.ValidityShortMaxMS, c.ValidityLongMaxMS = ms(time.Duration(s.ValidityShortMax)), ms(time.Duration(s.ValidityLongMax))
	c.StaleAccepted, c.StaleRejected = s.StaleAccepted, s.StaleRejected
	c.LostUpdates, c.TokenRegressions = s.LostUpdates, s.TokenRegressions
	c.Linearizable, c.LinearizableReason = r.Linearizable.Result, r.Linearizable.Reason
	c.LinearizableFenced, c.LinearizableFencedReason = r.LinearizableFenced.Result, r.LinearizableFenced.Reason
	c.History = r.History

	c.TimelineStepS = r.TimelineStep.Seconds()
	c.Timeline = append([]int64{}, r.Timeline...)
	c.FaultWindows = append([]results.Window{}, o.Windows...)
	if len(o.Windows) > 0 {
		c.Availability = availability(r.Ops, o.Windows, r.Timeline, r.TimelineStep, r.Elapsed)
	}
	c.Extends, c.ExtendsFailed = s.Extends, s.ExtendsFailed
	c.Injections = len(o.Targets)
	c.Targets, c.PausesLanded = landed(charge(o.Targets, o.Windows, s), s.Pauses)
	if len(o.FaultFailures) > 0 {
		c.Invalid = true
		c.InvalidReason = "the fault did not inject as planned: " + o.FaultFailures[0]
	}
	if slices.ContainsFunc(c.Targets, func(t results.Target) bool { return t.Tested != nil }) {
		n := 0
		for _, t := range c.Targets {
			if t.Counted() {
				n++
			}
		}
		c.InjectionsTested = &n
	}
	if n, _ := c.Tested(); n > 0 {
		hit := 0
		for _, t := range c.Targets {
			if t.Counted() && t.Incidents > 0 {
				hit++
			}
		}
		c.IncidentRateUpper95 = stats.Upper95(hit, n)
	}
	c.Notes = append(c.Notes, o.notes(guard)...)
	return nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// charge returns the targets, one per injection, each with its strike
// (the start of its window, in order) and what began from then until the
// next strike: incidents by class and stale writes accepted, as the
// store of the report's guard saw them. An injection is a trial whose
// failure is what it is charged with. What began before the first strike
// is charged to the first injection (no fault caused it, but no rate may
// leave it out); without windows nothing can be placed, and every event
// is charged to the first.
func charge(targets []results.Target, windows []results.Window, r history.Report) []results.Target {
	out := slices.Clone(targets)
	if len(out) == 0 {
		return out
	}
	for i := range out {
		if len(windows) > 0 {
			out[i].AtS = windows[min(i, len(windows)-1)].StartS
		}
		out[i].Incidents, out[i].IncidentsLockBug, out[i].IncidentsAmbiguous, out[i].StaleAccepted = 0, 0, 0, 0
	}
	// at returns the injection charged with an event at ns.
	at := func(ns int64) *results.Target {
		s, i := float64(ns)/1e9, 0
		for j := range out {
			if len(windows) > 0 && out[j].AtS <= s {
				i = j
			}
		}
		return &out[i]
	}
	for _, e := range r.Episodes {
		t := at(e.Start)
		t.Incidents++
		switch e.Class {
		case history.LockBug:
			t.IncidentsLockBug++
		case history.Ambiguous:
			t.IncidentsAmbiguous++
		}
	}
	for _, ns := range r.StaleAcceptedAt {
		at(ns).StaleAccepted++
	}
	return out
}

// availability measures the service inside the windows and after them,
// from the timeline and, when present, the history's acquires.
func availability(ops []history.Op, windows []results.Window, timeline []int64, step, elapsed time.Duration) *results.Availability {
	a := &results.Availability{}
	stepS := step.Seconds()
	first := windows[0].StartS
	var before, inside, insideS float64
	for i, n := range timeline {
		from, to := float64(i)*stepS, float64(i+1)*stepS
		if to <= first {
			before += float64(n)
		}
		if in := overlapS(windows, from, to); in > 0 {
			inside += float64(n) * in / stepS
		}
	}
	insideS = overlapS(windows, 0, elapsed.Seconds())
	for _, w := range windows {
		a.WindowThroughput = append(a.WindowThroughput, windowRate(timeline, stepS, w))
	}
	if full := float64(int(first/stepS)) * stepS; full > 0 {
		a.BaselineThroughput = before / full
	}
	if insideS > 0 {
		a.InFaultThroughput = inside / insideS
	}
	h := hdr.New(1, int64(10*time.Minute/time.Microsecond), 3)
	for _, o := range ops {
		if o.F != history.Acquire || o.Type != history.OK || o.WorkerComplete == 0 {
			continue
		}
		if inWindow(windows, float64(o.Invoke)/1e9) {
			_ = h.RecordValue(max((o.WorkerComplete-o.WorkerInvoke)/1e3, 1))
		}
	}
	if h.TotalCount() > 0 {
		a.InFaultP99US = h.ValueAtQuantile(99)
	}
	half := a.BaselineThroughput * stepS / 2
	for _, w := range windows {
		rec := -1.0
		for i := int(w.EndS / stepS); i < len(timeline) && a.BaselineThroughput > 0; i++ {
			if float64(timeline[i]) >= half {
				rec = max(float64(i)*stepS-w.EndS, 0)
				break
			}
		}
		a.RecoveryS = append(a.RecoveryS, rec)
	}
	return a
}

// windowRate is grants/s inside one window, from the timeline (a step
// the window covers in part counts in proportion).
func windowRate(timeline []int64, stepS float64, w results.Window) float64 {
	var n float64
	for i, x := range timeline {
		from, to := float64(i)*stepS, float64(i+1)*stepS
		if in := min(to, w.EndS) - max(from, w.StartS); in > 0 {
			n += float64(x) * in / stepS
		}
	}
	if d := w.EndS - w.StartS; d > 0 {
		return n / d
	}
	return 0
}

// overlapS is how many seconds of [from, to] the windows cover (their
// union).
func overlapS(windows []results.Window, from, to float64) float64 {
	type span struct{ a, b float64 }
	var spans []span
	for _, w := range windows {
		a, b := max(w.StartS, from), min(w.EndS, to)
		if b > a {
			spans = append(spans, span{a, b})
		}
	}
	slices.SortFunc(spans, func(x, y span) int {
		switch {
		case x.a < y.a:
			return -1
		case x.a > y.a:
			return 1
		}
		return 0
	})
	var total, end float64
	end = from
	for _, s := range spans {
		a := max(s.a, end)
		if s.b > a {
			total += s.b - a
			end = s.b
		}
	}
	return total
}

func inWindow(windows []results.Window, at float64) bool {
	for _, w := range windows {
		if w.StartS <= at && at < w.EndS {
			return true
		}
	}
	return false
}

// notes explain what the counts alone do not say, under guard.
func (o *Outcome) notes(guard judge.Guard) []string {
	var n []string
	r := o.Result
	rep := r.Reports[guard]
	if r.Stopped != "" {
		n = append(n, fmt.Sprintf("the case ran %.3fs of %v: %s; partial results", r.Elapsed.Seconds(), r.Duration, r.Stopped))
	}
	for _, u := range r.Unrecorded {
		n = append(n, "the judge could not record all of the case: "+u)
	}
	for _, f := range o.FaultFailures {
		n = append(n, "fault not injected as planned, "+f)
	}
	for _, d := range r.Dead {
		n = append(n, "client died: "+d)
	}
	if guard.Fenced() && rep.Unfenced > 0 {
		n = append(n, fmt.Sprintf("guard %s: %s issues no fencing tokens, so %d of %d writes could not be fenced and were "+
			"accepted as with guard none",
			guard, o.Info.Name, rep.Unfenced, rep.Writes))
	}
	if guard == judge.GuardCAS {
		n = append(n, "guard cas: each section marks the resource with its unique id at its first access and writes only while the mark is its "+
			"own; it does not order writers")
	}
	if x := rep.RejectedCurrent; x > 0 {
		n = append(n, fmt.Sprintf("%d writes of holders that had not been superseded were rejected (their token was below one the resource had "+
			"seen): safe, but work lost", x))
	}
	for _, v := range []struct {
		what string
		v    history.Verdict
	}{{"mutex", r.Linearizable}, {"fenced-mutex", r.LinearizableFenced}} {
		if v.v.Reason != "" {
			n = append(n, fmt.Sprintf("%s model: %s: %s", v.what, v.v.Result, v.v.Reason))
		}
	}
	m := r.Metrics
	for _, k := range []string{results.ErrNode, results.ErrLost, results.ErrTimeout, results.ErrNotAcquired, results.ErrOther} {
		if msg, ok := m.FirstErrors[k]; ok {
			n = append(n, fmt.Sprintf("%d %s errors; the first: %s", m.Errors[k], k, msg))
		}
	}
	for _, ex := range rep.Examples {
		n = append(n, "violation: "+ex)
	}
	return append(n, o.Notes...)
}
