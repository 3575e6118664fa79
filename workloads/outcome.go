package workloads

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// Outcome is what one Run measured: the load's metrics, the resource's
// safety counts and the fault windows. Fill turns it into a results.Case.
type Outcome struct {
	// Spec is the spec that ran, with its defaults applied.
	Spec Spec
	// Info describes the backend (from the first client's Locker).
	Info locker.Info
	// Guard is the resource's guard mode.
	Guard Guard
	// Start is when the load started: time zero of the timeline and the
	// windows.
	Start time.Time
	// Elapsed is the measured duration: from Start until the load stopped
	// (Duration, the caller's context), or until the last client finished
	// when MaxOps ended it first. Throughput is grants over Elapsed.
	Elapsed time.Duration
	// Stopped says why the load stopped: StopDuration, StopMaxOps,
	// StopContext or StopFatal.
	Stopped string
	// Ops counts the operations (acquire attempts) started.
	Ops int64
	// Metrics are the Recorder's: grants, latencies, errors, timeline.
	Metrics
	// Safety is the resource's report.
	Safety Report
	// KeyGrants counts the sections of each key, by rank (Spec.KeyNames).
	KeyGrants []int64
	// Missed counts the open loop's arrivals due before the end that no
	// client started (about, when the run ended by its duration): the
	// backlog of a backend slower than the asked rate.
	Missed int64
	// Windows are the fault windows the nemesis and the stalls recorded.
	Windows []results.Window
	// FaultFailures are the nemesis's failures to inject its fault
	// (Faults.Fail), with when they happened.
	FaultFailures []string
	// Notes explain the numbers (results.Case.Notes).
	Notes []string
}

// Throughput is grants per second over the measured duration.
func (o *Outcome) Throughput() float64 {
	if o.Elapsed <= 0 {
		return 0
	}
	return float64(o.Acquired) / o.Elapsed.Seconds()
}

// outcome gathers the results once every client (done at done) and the
// nemesis (at end) are done.
func (e *engine) outcome(info locker.Info, done, end time.Time) *Outcome {
	elapsed := e.stoppedAt.Sub(e.start)
	if e.stopWhy == StopMaxOps || e.stoppedAt.After(done) {
		elapsed = done.Sub(e.start)
	}
	o := &Outcome{
		Spec: e.spec, Info: info, Guard: e.res.Guard(), Start: e.start,
		Elapsed: elapsed, Stopped: e.stopWhy, Ops: e.ops.Load(),
		Metrics: e.rec.Metrics(), Safety: e.res.Report(),
		Windows: e.faults.finish(end), FaultFailures: e.faults.failures(),
	}
	o.KeyGrants = make([]int64, len(e.keys))
	for i, k := range e.keys {
		o.KeyGrants[i] = o.Safety.Grants[k]
	}
	if e.sched != nil {
		taken, untaken := e.sched.counts(e.start.Add(e.spec.Duration))
		o.Missed = taken - o.Ops
		if e.stopWhy == StopDuration {
			o.Missed += untaken
		}
	}
	o.Notes = o.notes()
	return o
}

// notes explain what the counts alone do not say.
func (o *Outcome) notes() []string {
	var n []string
	s, r := o.Spec, o.Safety
	switch o.Stopped {
	case StopContext:
		n = append(n, fmt.Sprintf("the run was interrupted after %.3fs of %v: partial results", o.Elapsed.Seconds(), s.Duration))
	case StopFatal:
		n = append(n, "the run stopped early: the backend refused the settings")
	}
	for _, f := range o.FaultFailures {
		n = append(n, "fault not injected as planned, "+f)
	}
	if o.Guard == GuardFence && r.Unfenced > 0 {
		n = append(n, fmt.Sprintf("guard fence: %s issues no fencing tokens, so %d of %d writes could not be fenced and were accepted as with guard none",
			o.Info.Name, r.Unfenced, r.Writes))
	}
	if o.Guard == GuardCAS {
		n = append(n, "guard cas: each section marks the resource with its grant's unique value and writes only while the mark is its own; it does not order writers")
	}
	if r.RejectedCurrent > 0 {
		n = append(n, fmt.Sprintf("%d writes of holders that had not been superseded were rejected (their token was below one seen before): safe, but work lost", r.RejectedCurrent))
	}
	if s.Hold.Max() >= s.TTL {
		n = append(n, fmt.Sprintf("hold time %v can reach the TTL %v: holders may outlive their leases without any fault", s.Hold, s.TTL))
	}
	if s.Rate > 0 && o.Missed > 0 {
		n = append(n, fmt.Sprintf("open loop: %d arrivals of the %.0f/s asked were not started before the end; their wait is not in the latency histogram", o.Missed, s.Rate))
	}
	for _, k := range []string{results.ErrNode, results.ErrLost, results.ErrTimeout, results.ErrNotAcquired, results.ErrOther} {
		if msg, ok := o.FirstErrors[k]; ok {
			n = append(n, fmt.Sprintf("%d %s errors; the first: %s", o.Errors[k], k, msg))
		}
	}
	for _, ex := range r.Examples {
		n = append(n, "violation: "+ex)
	}
	return n
}

// Fill writes the outcome into c: the settings of the spec, the backend's
// facts, the measurements, the safety counts, the timeline, the fault
// windows, the encoded histograms and the notes (appended). It leaves the
// fields Run cannot know — Fault, Trial, Host — and Backend when already
// set (the name the backend was opened by).
func (o *Outcome) Fill(c *results.Case) error {
	if c.Backend == "" {
		c.Backend = o.Info.Name
	}
	c.Workload = string(o.Spec.Workload)
	c.Guard = string(o.Guard)
	c.Fencing = o.Guard == GuardFence
	c.Clients = o.Spec.Clients
	c.Keys = o.Spec.Keys
	c.TTLMillis = o.Spec.TTL.Milliseconds()
	c.DurationS = o.Elapsed.Seconds()
	c.TargetRate = o.Spec.Rate
	c.Nodes = len(o.Info.Nodes)
	c.Quorum = o.Info.Quorum
	c.Guarantee = o.Info.Guarantee

	c.Acquired = o.Acquired
	c.Throughput = o.Throughput()
	c.LatencyUS = results.Summarise(o.Acquire)
	c.HoldUS = results.Summarise(o.Hold)
	c.ReleaseUS = results.Summarise(o.Release)
	c.Errors = make(map[string]int64, len(o.Errors))
	for k, v := range o.Errors {
		c.Errors[k] = v
	}

	c.Overlaps = o.Safety.Overlaps
	c.StaleAccepted = o.Safety.StaleAccepted
	c.StaleRejected = o.Safety.StaleRejected
	c.LostUpdates = o.Safety.LostUpdates
	c.TokenRegressions = o.Safety.TokenRegressions

	c.TimelineStepS = o.TimelineStep.Seconds()
	c.Timeline = o.timeline()
	c.FaultWindows = append([]results.Window{}, o.Windows...)
	var err error
	if c.Histograms.Acquire, err = results.Encode(o.Acquire); err != nil {
		return fmt.Errorf("encode acquire histogram: %w", err)
	}
	if c.Histograms.Hold, err = results.Encode(o.Hold); err != nil {
		return fmt.Errorf("encode hold histogram: %w", err)
	}
	if c.Histograms.Release, err = results.Encode(o.Release); err != nil {
		return fmt.Errorf("encode release histogram: %w", err)
	}
	c.Notes = append(c.Notes, o.Notes...)
	return nil
}

// timeline is the grants per step, padded with empty steps to cover the
// measured duration.
func (o *Outcome) timeline() []int64 {
	n := len(o.Timeline)
	if o.TimelineStep > 0 {
		n = max(n, int((o.Elapsed+o.TimelineStep-1)/o.TimelineStep))
	}
	t := make([]int64, n)
	copy(t, o.Timeline)
	return t
}
