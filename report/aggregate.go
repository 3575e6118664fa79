package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// group aggregates the valid cases of one combination (one
// results.Case.Key): its trials, and within a trial the hosts that
// measured it.
//
// Aggregation, used everywhere in the report:
//   - throughput: per trial the sum over hosts; then the median over
//     trials, with the min–max range (Speed);
//   - latency percentiles: from the HDR histograms of every case merged
//     (the percentiles of all operations of all trials); when a case has
//     no histogram, the maximum of the cases' recorded percentiles. Per
//     trial too (P50, P99, OwnCost), for the spread;
//   - counts (acquired, errors, overlaps, incidents, stale writes, lost
//     updates, token regressions, injections): summed over trials,
//     because a violation in any trial is a violation, and each trial's
//     injections are more evidence. (Hosts of one trial are merged by
//     results.Merge, which takes the judge's counts once.)
//   - timeline: per trial the sum over hosts, then the mean over trials,
//     step by step, as grants per second;
//   - availability: one sample per case (per window for recovery).
type group struct {
	Key                             string
	Backend, Workload, Fault, Guard string
	FaultClass, Durability          string
	Clients                         int
	// ClientsAs lists how the clients ran (processes, goroutines).
	ClientsAs []string
	// Fencing is whether any case had its tokens checked by the resource.
	Fencing bool
	// Unfenced is whether any fence-guarded case ran with Fencing false:
	// the resource could not check a token, the backend issued none.
	Unfenced bool
	Trials   int
	Cases    int
	// Independent is set when every case ran on servers started for its
	// trial alone (results.Case.FreshServers): only then are its trials
	// independent samples (see independentTrials).
	Independent bool

	Nodes, Quorum int
	Guarantee     string
	// TTLMillis, PromiseMS and MaxValidityMS are the TTL asked and the
	// contract the cases were judged by (the first case's that declared
	// one).
	TTLMillis, PromiseMS, MaxValidityMS float64

	Acquired int64
	// Contended is the grants made while another client of the key was
	// waiting for it (results.Case.ContendedGrants): the trials a
	// fault-free double grant is counted in (an uncontended grant cannot
	// overlap, and would flatter the bound).
	Contended int64
	// Throughput is the median over trials of grants/s, ThroughputMin and
	// ThroughputMax its range; Speed holds all three with the count.
	Throughput                   float64
	ThroughputMin, ThroughputMax float64
	Speed                        stats.Spread
	// speeds are the trials' grants/s themselves, the samples the
	// ranking's speed test compares (see separation).
	speeds    []float64
	DurationS float64
	Errors    map[string]int64

	Latency, Hold, Release results.Percentiles
	// LatencyPooled is whether Latency comes from the merged histograms
	// of every case (else from the cases' own percentiles).
	LatencyPooled bool
	// P50 and P99 are the acquire percentiles of each trial; OwnCost is
	// each trial's acquire p50 plus release p50 (µs): what the lock itself
	// costs a client when nobody waits (at 1 client).
	P50, P99, OwnCost stats.Spread
	// hist is the merged acquire histogram of the cases that had one;
	// nil when none had.
	hist *hdr.Histogram

	tally
	// runs are the runs of the lock behind the group's cases, by runOf,
	// each with what the lock did in it (runGroup): the report counts a
	// run once however many guards its writes were judged under.
	runs map[string]*group

	// Linearizable and LinearizableFenced count the cases' verdicts.
	Linearizable, LinearizableFenced verdicts
	Targets                          []results.Target
	Histories                        []string
	// InFault is each case's in-fault grants as a fraction of its
	// baseline; InFaultP99 its in-fault acquire p99 (µs); Recovery each
	// window's time to recover (s, +Inf when it did not).
	InFault, InFaultP99, Recovery []float64

	TimelineStepS float64
	Timeline      []float64 // grants per second, mean over trials
	Windows       []results.Window

	Notes []string
}

// aggregate combines the cases of one key, as documented on group.
func aggregate(key string, cases []results.Case) (*group, []string) {
	var problems []string
	first := cases[0]
	g := &group{
		Key: key, Backend: first.Backend, Workload: first.Workload, Fault: first.Fault, FaultClass: first.FaultClass,
		Durability: first.Durability, Guard: first.Guard, Clients: first.Clients, Cases: len(cases), Errors: map[string]int64{},
	}
	type trial struct {
		throughput       float64
		timeline         []float64
		step             float64
		acquire, release []results.Case
	}
	trials := map[int]*trial{}
	var trialOrder []int
	dec := decoder()
	g.Independent = true
	for _, c := range cases {
		g.Independent = g.Independent && c.FreshServers
		g.Fencing = g.Fencing || c.Fencing
		g.Unfenced = g.Unfenced || ((c.Guard == guardFence || c.Guard == guardFenceRW) && !c.Fencing)
		g.Nodes = max(g.Nodes, c.Nodes)
		g.Quorum = max(g.Quorum, c.Quorum)
		if g.Guarantee == "" {
			g.Guarantee = c.Guarantee
		}
		if g.PromiseMS == 0 && c.PromiseMS > 0 {
			g.TTLMillis, g.PromiseMS, g.MaxValidityMS = float64(c.TTLMillis), c.PromiseMS, c.MaxValidityMS
		}
		if c.ClientsAs != "" {
			g.ClientsAs = appendNew(g.ClientsAs, c.ClientsAs)
		}
		g.Acquired += c.Acquired
		g.Contended += c.ContendedGrants
		g.DurationS = max(g.DurationS, c.DurationS)
		if g.runs == nil {
			g.runs = map[string]*group{}
		}
		if id := runOf(&c); g.runs[id] == nil {
			g.runs[id] = runGroup(&c)
		}
		for k, v := range c.Errors {
			g.Errors[k] += v
		}
		g.tally.add(tallyOf(&c))
		g.Linearizable.add(c.Linearizable, c.LinearizableReason)
		g.LinearizableFenced.add(c.LinearizableFenced, c.LinearizableFencedReason)
		g.Targets = append(g.Targets, c.Targets...)
		if c.History != "" {
			g.Histories = append(g.Histories, c.History)
		}
		g.addAvailability(c.Availability)
		for _, n := range c.Notes {
			g.Notes = appendNew(g.Notes, n)
		}
		for _, w := range c.FaultWindows {
			if validFloat(w.StartS) && validFloat(w.EndS) && w.EndS >= w.StartS {
				g.Windows = appendNew(g.Windows, w)
			} else {
				problems = append(problems, fmt.Sprintf("%s trial %d: fault window %q %v–%v s is not a valid span; left "+
					"out", key, c.Trial, w.Label, w.StartS, w.EndS))
			}
		}

		t, ok := trials[c.Trial]
		if !ok {
			t = &trial{step: c.TimelineStepS}
			trials[c.Trial] = t
			trialOrder = append(trialOrder, c.Trial)
		}
		t.acquire = append(t.acquire, c)
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
			problems = append(problems, fmt.Sprintf("%s trial %d: timeline step %v s is not positive; timeline left "+
				"out", key, c.Trial, c.TimelineStepS))
		case t.step != c.TimelineStepS:
			problems = append(problems, fmt.Sprintf("%s trial %d: timeline step %v s differs from %v s of the same trial; left "+
				"out", key, c.Trial, c.TimelineStepS, t.step))
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
	var sums, counts, tps, p50s, p99s, costs []float64
	for _, id := range trialOrder {
		t := trials[id]
		tps = append(tps, t.throughput)
		if hasOps(t.acquire) {
			a50, a99 := trialPercentiles(t.acquire, acquireOf, dec)
			r50, _ := trialPercentiles(t.acquire, releaseOf, dec)
			p50s, p99s = append(p50s, float64(a50)), append(p99s, float64(a99))
			costs = append(costs, float64(a50+r50))
		}
		if len(t.timeline) == 0 {
			continue
		}
		if g.TimelineStepS == 0 {
			g.TimelineStepS = t.step
		}
		if t.step != g.TimelineStepS {
			problems = append(problems, fmt.Sprintf("%s trial %d: timeline step %v s differs from %v s of trial %d; left out of the "+
				"mean", key, id, t.step, g.TimelineStepS, trialOrder[0]))
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
	g.Speed, g.speeds = stats.SpreadOf(tps), tps
	g.Throughput, g.ThroughputMin, g.ThroughputMax = g.Speed.Median, g.Speed.Min, g.Speed.Max
	g.P50, g.P99, g.OwnCost = stats.SpreadOf(p50s), stats.SpreadOf(p99s), stats.SpreadOf(costs)
	for j := range sums {
		g.Timeline = append(g.Timeline, sums[j]/counts[j]/g.TimelineStepS)
	}
	slices.SortFunc(g.Windows, func(a, b results.Window) int { return cmp.Compare(a.StartS, b.StartS) })

	var p []string
	g.Latency, g.hist, g.LatencyPooled, p = pool(key, "acquire", cases, acquireOf, dec)
	problems = append(problems, p...)
	g.Hold, _, _, p = pool(key, "hold", cases, func(c *results.Case) (string, results.Percentiles) { return c.Histograms.Hold, c.HoldUS }, dec)
	problems = append(problems, p...)
	g.Release, _, _, p = pool(key, "release", cases, releaseOf, dec)
	problems = append(problems, p...)
	return g, problems
}

// independentTrials is how many independent trials the group's speed
// rests on: its trials when each ran on fresh servers, else one — trials
// that shared servers are one experiment repeated, not separate samples.
func (g *group) independentTrials() int {
	if g.Independent {
		return g.Speed.N
	}
	return min(g.Speed.N, 1)
}

// decoder returns results.Decode memoised: a case's histograms serve the
// pooled percentiles and the per-trial ones, and decoding dominates the
// cost of a report. The histograms it returns are only read.
func decoder() func(string) (*hdr.Histogram, error) {
	type decoded struct {
		h   *hdr.Histogram
		err error
	}
	cache := map[string]decoded{}
	return func(s string) (*hdr.Histogram, error) {
		d, ok := cache[s]
		if !ok {
			d.h, d.err = results.Decode(s)
			cache[s] = d
		}
		return d.h, d.err
	}
}

func acquireOf(c *results.Case) (string, results.Percentiles) {
	return c.Histograms.Acquire, c.LatencyUS
}

func releaseOf(c *results.Case) (string, results.Percentiles) {
	return c.Histograms.Release, c.ReleaseUS
}

// hasOps reports whether any case acquired or recorded an acquire
// latency: a trial without grants has no latency, not a fast one.
func hasOps(cases []results.Case) bool {
	for _, c := range cases {
		if c.Acquired > 0 || c.LatencyUS.Max > 0 {
			return true
		}
	}
	return false
}

// trialPercentiles returns the p50 and p99 of one trial's cases (its
// hosts): from the histogram itself when one host measured it, merged
// when several did, from the recorded percentiles (the larger) when a
// histogram is missing or does not decode.
func trialPercentiles(cases []results.Case, get func(*results.Case) (string, results.Percentiles), decode func(string) (*hdr.Histogram,
	error)) (p50, p99 int64) {
	var hs []*hdr.Histogram
	for i := range cases {
		enc, sum := get(&cases[i])
		h, err := decode(enc)
		if err != nil || (h.TotalCount() == 0 && cases[i].Acquired > 0) {
			for j := range cases {
				_, sum = get(&cases[j])
				p50, p99 = max(p50, sum.P50), max(p99, sum.P99)
			}
			return p50, p99
		}
		if h.TotalCount() > 0 {
			hs = append(hs, h)
		}
	}
	switch len(hs) {
	case 0:
		return 0, 0
	case 1:
		return hs[0].ValueAtQuantile(50), hs[0].ValueAtQuantile(99)
	}
	merged := results.NewHistogram()
	for _, h := range hs {
		merged.Merge(h)
	}
	return merged.ValueAtQuantile(50), merged.ValueAtQuantile(99)
}

// pool merges the histograms of cases. When every case with operations
// has a decodable, non-empty histogram the percentiles come from the
// merge; otherwise they are the maximum of the cases' own percentiles
// (the conservative choice for latency). The merged histogram of the
// cases that had one is returned for CDFs either way. Problems are
// named only when key is set (the per-trial pass stays quiet, having
// been reported by the pass over all cases).
func pool(key, what string, cases []results.Case, get func(*results.Case) (string, results.Percentiles),
	decode func(string) (*hdr.Histogram, error)) (results.Percentiles, *hdr.Histogram, bool, []string) {
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
		h, err := decode(enc)
		if err != nil {
			if key != "" {
				problems = append(problems, fmt.Sprintf("%s trial %d: %s histogram does not decode (%v); using its recorded "+
					"percentiles", key, c.Trial, what, err))
			}
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
		if dropped := merged.Merge(h); dropped > 0 && key != "" {
			problems = append(problems, fmt.Sprintf("%s trial %d: %d %s values outside the histogram range were "+
				"dropped", key, c.Trial, dropped, what))
		}
	}
	if complete && merged != nil {
		return results.Summarise(merged), merged, true, problems
	}
	return worst, merged, false, problems
}

// totals sums the counts and evidence of groups. What the lock did —
// grants, injections, overlaps and incidents, token regressions, the
// checkers' verdicts, targets, availability — is counted once per run
// (groups of several guards may judge one run's writes); what the
// resource let through — stale writes accepted and rejected, lost
// updates — is summed per guard.
func totals(gs []*group) (t group) {
	t.Errors = map[string]int64{}
	t.runs = map[string]*group{}
	for _, g := range gs {
		t.StaleAccepted += g.StaleAccepted
		t.StaleRejected += g.StaleRejected
		t.Hit.Stale += g.Hit.Stale
		t.LostUpdates += g.LostUpdates
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
		for _, c := range g.ClientsAs {
			t.ClientsAs = appendNew(t.ClientsAs, c)
		}
		if g.Durability != "" {
			t.Durability = joinNew(t.Durability, g.Durability)
		}
		for id, r := range g.runs {
			if t.runs[id] == nil {
				t.runs[id] = r
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(t.runs)) {
		r := t.runs[id]
		t.Acquired += r.Acquired
		t.Contended += r.Contended
		t.addRun(r.tally)
		t.Linearizable.merge(r.Linearizable)
		t.LinearizableFenced.merge(r.LinearizableFenced)
		t.Targets = append(t.Targets, r.Targets...)
		t.InFault = append(t.InFault, r.InFault...)
		t.InFaultP99 = append(t.InFaultP99, r.InFaultP99...)
		t.Recovery = append(t.Recovery, r.Recovery...)
	}
	return t
}

// joinNew appends v to a ", "-joined list unless it is there.
func joinNew(list, v string) string {
	switch {
	case list == "":
		return v
	case slices.Contains(strings.Split(list, ", "), v):
		return list
	}
	return list + ", " + v
}

// violations is every count that means the lock or the resource failed:
// lock-bug (and unclassified) incidents, stale writes accepted, lost
// updates, token regressions. Expired-holder incidents are not in it:
// they are what fencing exists for, and show as stale writes when the
// resource let them through.
func (g *group) violations() int64 {
	return g.lockBugs() + g.StaleAccepted + g.LostUpdates + g.TokenRegressions
}
