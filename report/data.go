package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/lockbench/lockbench/results"
)

// The guard modes of results.Case.Guard, and the fault names the report
// gives a meaning to. Any other name is rendered as it is.
const (
	guardNone   = "none"
	guardFence  = "fence"
	faultNone   = "none"
	faultPause  = "client-pause"
	unsetLabel  = "(unset)"
	unnamedCase = "(unnamed)"
)

// group aggregates the cases of one combination (one results.Case.Key):
// its trials, and within a trial the hosts that measured it.
//
// Aggregation, used everywhere in the report:
//   - throughput: per trial the sum over hosts, then the mean over trials
//     (min and max over trials are kept to show the spread);
//   - latency percentiles: from the HDR histograms of every case merged
//     (the percentiles of all operations of all trials); when a case has
//     no histogram, the maximum of the cases' recorded percentiles;
//   - counts (acquired, errors, overlaps, stale writes, lost updates,
//     token regressions): summed over trials and hosts, because a
//     violation in any trial is a violation;
//   - timeline: per trial the sum over hosts, then the mean over trials,
//     step by step, as grants per second.
type group struct {
	Key                             string
	Backend, Workload, Fault, Guard string
	Clients                         int
	// Fencing is whether any case had its tokens checked by the resource.
	Fencing bool
	// Unfenced is whether any fence-guarded case ran with Fencing false:
	// the resource could not check a token, the backend issued none.
	Unfenced bool
	Trials   int
	Cases    int

	Nodes, Quorum int
	Guarantee     string

	Acquired                     int64
	Throughput                   float64
	ThroughputMin, ThroughputMax float64
	DurationS                    float64
	Errors                       map[string]int64

	Latency, Hold, Release results.Percentiles
	// LatencyPooled is whether Latency comes from the merged histograms
	// of every case (else from the cases' own percentiles).
	LatencyPooled bool
	// hist is the merged acquire histogram of the cases that had one;
	// nil when none had.
	hist *hdr.Histogram

	Overlaps, StaleAccepted, StaleRejected, LostUpdates, TokenRegressions int64

	TimelineStepS float64
	Timeline      []float64 // grants per second, mean over trials
	Windows       []results.Window

	Notes []string
}

// violations is every count that means the lock or the resource failed.
func (g *group) violations() int64 {
	return g.Overlaps + g.StaleAccepted + g.LostUpdates + g.TokenRegressions
}

// dataset is a results file prepared for rendering: cases grouped and
// aggregated, the dimensions present in a stable order, and every
// problem found in the input.
type dataset struct {
	File      *results.File
	Groups    []*group
	Backends  []string
	Workloads []string
	Faults    []string
	Guards    []string
	Clients   []int
	// Problems name input the report could not use as it is.
	Problems []string
}

// guardOf returns the case's guard mode; an empty Guard is derived from
// Fencing so that older files still group correctly.
func guardOf(c *results.Case) string {
	switch {
	case c.Guard != "":
		return c.Guard
	case c.Fencing:
		return guardFence
	}
	return guardNone
}

func orUnset(s, unset string) string {
	if strings.TrimSpace(s) == "" {
		return unset
	}
	return s
}

// normalised returns the case with its naming fields filled in, so that
// grouping and keys never depend on empty strings.
func normalised(c results.Case) results.Case {
	c.Backend = orUnset(c.Backend, unnamedCase)
	c.Workload = orUnset(c.Workload, unsetLabel)
	c.Fault = orUnset(c.Fault, unsetLabel)
	c.Guard = guardOf(&c)
	return c
}

// analyse groups and aggregates the cases of f. It never fails: input
// it cannot use is skipped and named in Problems.
func analyse(f *results.File) *dataset {
	ds := &dataset{File: f}
	if f == nil {
		ds.File = &results.File{}
		ds.Problems = append(ds.Problems, "no results file was given")
		return ds
	}
	byKey := map[string][]results.Case{}
	var order []string
	for i, raw := range f.Cases {
		c := normalised(raw)
		if c.Clients <= 0 {
			ds.Problems = append(ds.Problems, fmt.Sprintf("case %d (%s): clients %d is not positive; it is kept in the tables but left out of per-client charts", i, c.Key(), c.Clients))
		}
		k := c.Key()
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	for _, k := range order {
		g, problems := aggregate(k, byKey[k])
		ds.Groups = append(ds.Groups, g)
		ds.Problems = append(ds.Problems, problems...)
	}
	slices.SortFunc(ds.Groups, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.Backend, b.Backend), cmp.Compare(a.Workload, b.Workload),
			compareFaults(a.Fault, b.Fault), compareGuards(a.Guard, b.Guard), cmp.Compare(a.Clients, b.Clients))
	})
	for _, g := range ds.Groups {
		ds.Backends = appendNew(ds.Backends, g.Backend)
		ds.Workloads = appendNew(ds.Workloads, g.Workload)
		ds.Faults = appendNew(ds.Faults, g.Fault)
		ds.Guards = appendNew(ds.Guards, g.Guard)
		ds.Clients = appendNew(ds.Clients, g.Clients)
	}
	slices.Sort(ds.Backends)
	slices.Sort(ds.Workloads)
	slices.SortFunc(ds.Faults, compareFaults)
	slices.SortFunc(ds.Guards, compareGuards)
	slices.Sort(ds.Clients)
	return ds
}

func appendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// compareFaults orders "none" first, then by name.
func compareFaults(a, b string) int {
	return cmp.Or(cmp.Compare(rank(a, faultNone), rank(b, faultNone)), cmp.Compare(a, b))
}

// compareGuards orders none, fence, then by name.
func compareGuards(a, b string) int {
	return cmp.Or(cmp.Compare(rank(a, guardNone, guardFence), rank(b, guardNone, guardFence)), cmp.Compare(a, b))
}

func rank(s string, first ...string) int {
	if i := slices.Index(first, s); i >= 0 {
		return i
	}
	return len(first)
}

// validFloat reports whether v is a finite, non-negative measurement.
func validFloat(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// aggregate combines the cases of one key, as documented on group.
func aggregate(key string, cases []results.Case) (*group, []string) {
	var problems []string
	first := cases[0]
	g := &group{
		Key: key, Backend: first.Backend, Workload: first.Workload, Fault: first.Fault,
		Guard: first.Guard, Clients: first.Clients, Cases: len(cases), Errors: map[string]int64{},
	}
	type trial struct {
		throughput float64
		timeline   []float64
		step       float64
	}
	trials := map[int]*trial{}
	var trialOrder []int
	for _, c := range cases {
		g.Fencing = g.Fencing || c.Fencing
		g.Unfenced = g.Unfenced || (c.Guard == guardFence && !c.Fencing)
		g.Nodes = max(g.Nodes, c.Nodes)
		g.Quorum = max(g.Quorum, c.Quorum)
		if g.Guarantee == "" {
			g.Guarantee = c.Guarantee
		}
		g.Acquired += c.Acquired
		g.DurationS = max(g.DurationS, c.DurationS)
		for k, v := range c.Errors {
			g.Errors[k] += v
		}
		g.Overlaps += c.Overlaps
		g.StaleAccepted += c.StaleAccepted
		g.StaleRejected += c.StaleRejected
		g.LostUpdates += c.LostUpdates
		g.TokenRegressions += c.TokenRegressions
		for _, n := range c.Notes {
			g.Notes = appendNew(g.Notes, n)
		}
		for _, w := range c.FaultWindows {
			if validFloat(w.StartS) && validFloat(w.EndS) && w.EndS >= w.StartS {
				g.Windows = appendNew(g.Windows, w)
			} else {
				problems = append(problems, fmt.Sprintf("%s trial %d: fault window %q %v–%v s is not a valid span; left out", key, c.Trial, w.Label, w.StartS, w.EndS))
			}
		}

		t, ok := trials[c.Trial]
		if !ok {
			t = &trial{step: c.TimelineStepS}
			trials[c.Trial] = t
			trialOrder = append(trialOrder, c.Trial)
		}
		tp := c.Throughput
		if !validFloat(tp) {
			problems = append(problems, fmt.Sprintf("%s trial %d: throughput %v is not a valid rate; using acquired/duration", key, c.Trial, tp))
			tp = 0
			if c.DurationS > 0 && c.Acquired >= 0 {
				tp = float64(c.Acquired) / c.DurationS
			}
		}
		t.throughput += tp
		switch {
		case len(c.Timeline) == 0:
		case !(c.TimelineStepS > 0) || math.IsInf(c.TimelineStepS, 0):
			problems = append(problems, fmt.Sprintf("%s trial %d: timeline step %v s is not positive; timeline left out", key, c.Trial, c.TimelineStepS))
		case t.step != c.TimelineStepS:
			problems = append(problems, fmt.Sprintf("%s trial %d: timeline step %v s differs from %v s of the same trial; left out", key, c.Trial, c.TimelineStepS, t.step))
		default:
			for len(t.timeline) < len(c.Timeline) {
				t.timeline = append(t.timeline, 0)
			}
			for i, v := range c.Timeline {
				t.timeline[i] += float64(v)
			}
		}
	}
	g.Trials = len(trials)
	slices.Sort(trialOrder)
	var sums, counts []float64
	for i, id := range trialOrder {
		t := trials[id]
		g.Throughput += t.throughput
		if i == 0 || t.throughput < g.ThroughputMin {
			g.ThroughputMin = t.throughput
		}
		g.ThroughputMax = max(g.ThroughputMax, t.throughput)
		if len(t.timeline) == 0 {
			continue
		}
		if g.TimelineStepS == 0 {
			g.TimelineStepS = t.step
		}
		if t.step != g.TimelineStepS {
			problems = append(problems, fmt.Sprintf("%s trial %d: timeline step %v s differs from %v s of trial %d; left out of the mean", key, id, t.step, g.TimelineStepS, trialOrder[0]))
			continue
		}
		for len(sums) < len(t.timeline) {
			sums, counts = append(sums, 0), append(counts, 0)
		}
		for j, v := range t.timeline {
			sums[j] += v
			counts[j]++
		}
	}
	g.Throughput /= float64(max(g.Trials, 1))
	for j := range sums {
		g.Timeline = append(g.Timeline, sums[j]/counts[j]/g.TimelineStepS)
	}
	slices.SortFunc(g.Windows, func(a, b results.Window) int { return cmp.Compare(a.StartS, b.StartS) })

	var p []string
	g.Latency, g.hist, g.LatencyPooled, p = pool(key, "acquire", cases, func(c *results.Case) (string, results.Percentiles) {
		return c.Histograms.Acquire, c.LatencyUS
	})
	problems = append(problems, p...)
	g.Hold, _, _, p = pool(key, "hold", cases, func(c *results.Case) (string, results.Percentiles) { return c.Histograms.Hold, c.HoldUS })
	problems = append(problems, p...)
	g.Release, _, _, p = pool(key, "release", cases, func(c *results.Case) (string, results.Percentiles) {
		return c.Histograms.Release, c.ReleaseUS
	})
	problems = append(problems, p...)
	return g, problems
}

// pool merges the histograms of cases. When every case with operations
// has a decodable, non-empty histogram the percentiles come from the
// merge; otherwise they are the maximum of the cases' own percentiles
// (the conservative choice for latency). The merged histogram of the
// cases that had one is returned for CDFs either way.
func pool(key, what string, cases []results.Case, get func(*results.Case) (string, results.Percentiles)) (results.Percentiles, *hdr.Histogram, bool, []string) {
	var problems []string
	var merged *hdr.Histogram
	complete := true
	var worst results.Percentiles
	for i := range cases {
		c := &cases[i]
		enc, sum := get(c)
		worst = results.Percentiles{
			P50: max(worst.P50, sum.P50), P90: max(worst.P90, sum.P90), P99: max(worst.P99, sum.P99),
			P999: max(worst.P999, sum.P999), Max: max(worst.Max, sum.Max), Mean: math.Max(worst.Mean, sum.Mean),
		}
		h, err := results.Decode(enc)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s trial %d: %s histogram does not decode (%v); using its recorded percentiles", key, c.Trial, what, err))
			complete = false
			continue
		}
		if h.TotalCount() == 0 {
			if c.Acquired > 0 {
				complete = false
			}
			continue
		}
		if merged == nil {
			merged = results.NewHistogram()
		}
		if dropped := merged.Merge(h); dropped > 0 {
			problems = append(problems, fmt.Sprintf("%s trial %d: %d %s values outside the histogram range were dropped", key, c.Trial, dropped, what))
		}
	}
	if complete && merged != nil {
		return results.Summarise(merged), merged, true, problems
	}
	return worst, merged, false, problems
}

// find returns the groups that match every non-zero field of q.
func (ds *dataset) find(q group) []*group {
	var out []*group
	for _, g := range ds.Groups {
		if (q.Backend == "" || g.Backend == q.Backend) && (q.Workload == "" || g.Workload == q.Workload) &&
			(q.Fault == "" || g.Fault == q.Fault) && (q.Guard == "" || g.Guard == q.Guard) &&
			(q.Clients == 0 || g.Clients == q.Clients) {
			out = append(out, g)
		}
	}
	return out
}

// nodes returns the largest node count a backend's cases reported.
func (ds *dataset) nodes(backend string) int {
	n := 0
	for _, g := range ds.find(group{Backend: backend}) {
		n = max(n, g.Nodes)
	}
	return n
}

// totals sums the safety counts of groups.
func totals(gs []*group) (t group) {
	t.Errors = map[string]int64{}
	for _, g := range gs {
		t.Acquired += g.Acquired
		t.Overlaps += g.Overlaps
		t.StaleAccepted += g.StaleAccepted
		t.StaleRejected += g.StaleRejected
		t.LostUpdates += g.LostUpdates
		t.TokenRegressions += g.TokenRegressions
		t.Trials = max(t.Trials, g.Trials)
		t.Cases += g.Cases
		t.Fencing = t.Fencing || g.Fencing
		t.Unfenced = t.Unfenced || g.Unfenced
		for k, v := range g.Errors {
			t.Errors[k] += v
		}
		for _, n := range g.Notes {
			t.Notes = appendNew(t.Notes, n)
		}
	}
	return t
}

// primaryGuard returns the guard under which the most backends were
// measured for the given workload and fault ("none" on a tie, then the
// guard order), so that one chart compares like with like.
func (ds *dataset) primaryGuard(workload, fault string) string {
	best, bestN := "", -1
	for _, guard := range ds.Guards {
		seen := map[string]bool{}
		for _, g := range ds.find(group{Workload: workload, Fault: fault, Guard: guard}) {
			seen[g.Backend] = true
		}
		if len(seen) > bestN {
			best, bestN = guard, len(seen)
		}
	}
	return best
}

// workloadsUnder returns the workloads measured under a fault, in order.
func (ds *dataset) workloadsUnder(fault string) []string {
	var out []string
	for _, w := range ds.Workloads {
		if len(ds.find(group{Workload: w, Fault: fault})) > 0 {
			out = append(out, w)
		}
	}
	return out
}
