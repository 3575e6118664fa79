package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/results"
)

// closeEnough is how near (as a fraction of the fastest) a backend's
// throughput must be for its lower cost (fewer nodes, then lower p99) to
// win over raw speed.
const closeEnough = 0.10

// Rules states the recommendation rules as the report applies them.
var Rules = []string{
	"Speed is a backend's peak throughput under fault \"none\" on the reference workload (the workload without faults that the most candidates ran; the first by name on a tie), under the guard most backends ran there: the mean over trials, the best over client counts. Its cost is its node count and its acquire p99 at that peak.",
	fmt.Sprintf("Choosing among qualifying backends: the fastest; but any backend within %.0f%% of the fastest with fewer nodes wins, and among equal node counts the lower p99.", closeEnough*100),
	"Efficiency locks (an occasional double grant is tolerable): a backend qualifies when it ran without faults with at least 2 clients (so a double grant could have shown), acquired locks, and counted zero violations (overlaps + stale writes accepted + lost updates + token regressions) in every fault-free case.",
	"Correctness locks: the run must contain fenced (guard \"fence\") cases under \"client-pause\" and under at least one node fault (any fault other than \"none\" and \"client-pause\"); otherwise no recommendation is made. A backend qualifies when it issues fencing tokens (its fenced cases ran with fencing on), was run fenced under client-pause and under at least one node fault, and its fenced cases, under every fault measured, accepted no stale write, lost no update and saw no token regression. Overlaps with fencing on are allowed (fencing is what makes them harmless) and reported.",
	"Fencing is required for a backend when, without fencing, it accepted a stale write or lost an update under some fault, or when its lock overlapped under some fault.",
}

// Verdict is one backend's standing under one recommendation question.
type Verdict struct {
	Backend   string
	Qualifies bool
	// Reason says why, with the numbers behind it.
	Reason string
	Nodes  int
	// Throughput is the peak fault-free grants/s on the reference
	// workload (0 when the backend did not run it), reached at Clients
	// with acquire p99 P99US.
	Throughput float64
	Clients    int
	P99US      int64
	// Fencing says, for correctness verdicts, whether fencing was needed
	// and the evidence.
	Fencing string
}

// Choice answers one question: which backend, or why none.
type Choice struct {
	// Backend is the recommended backend; empty when none qualifies or
	// the run cannot judge.
	Backend string
	// Judgeable is false when the run lacks the cases the question needs.
	Judgeable bool
	// Answer is the recommendation in a few sentences, from the numbers.
	Answer string
	// Missing names the cases the run would need to judge.
	Missing []string
	// Verdicts rank every backend: qualifying first, fastest first.
	Verdicts []Verdict
}

// Recommendation is what the measurements support for the two uses of a
// distributed lock, with the caveats they exposed.
type Recommendation struct {
	// Workload is the reference workload speeds were compared on.
	Workload    string
	Efficiency  Choice
	Correctness Choice
	Caveats     []string
}

// Recommend derives the recommendation from f by the Rules. It never
// fails: an empty or partial file yields choices that say what is
// missing.
func Recommend(f *results.File) *Recommendation { return analyse(f).recommend() }

func (ds *dataset) recommend() *Recommendation {
	r := &Recommendation{}
	r.Efficiency = ds.efficiency()
	r.Correctness = ds.correctness()
	r.Workload = ds.rank(&r.Efficiency, true)
	if w := ds.rank(&r.Correctness, false); r.Workload == "" {
		r.Workload = w
	}
	r.Efficiency.Answer = ds.efficiencyAnswer(r.Efficiency, r.Workload)
	r.Correctness.Answer = ds.correctnessAnswer(r.Correctness)
	r.Caveats = ds.caveats()
	return r
}

// peak returns the fastest fault-free group of a backend on a workload,
// under the guard most backends ran there (the one the summary table
// and charts show), or under any guard when the backend lacks that one.
func (ds *dataset) peak(backend, workload string) *group {
	for _, guard := range []string{ds.primaryGuard(workload, faultNone), ""} {
		var best *group
		for _, g := range ds.find(group{Backend: backend, Workload: workload, Fault: faultNone, Guard: guard}) {
			if g.Clients > 0 && (best == nil || g.Throughput > best.Throughput) {
				best = g
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// rank fills the verdicts' speed and cost, sorts them and picks the
// choice by the Rules; needSpeed refuses a choice without a measured
// fault-free speed. It returns the reference workload.
func (ds *dataset) rank(ch *Choice, needSpeed bool) string {
	var candidates []string
	for _, v := range ch.Verdicts {
		if v.Qualifies {
			candidates = append(candidates, v.Backend)
		}
	}
	if len(candidates) == 0 {
		for _, v := range ch.Verdicts {
			candidates = append(candidates, v.Backend)
		}
	}
	workload, most := "", 0
	for _, w := range ds.workloadsUnder(faultNone) {
		n := 0
		for _, b := range candidates {
			if ds.peak(b, w) != nil {
				n++
			}
		}
		if n > most {
			workload, most = w, n
		}
	}
	for i := range ch.Verdicts {
		v := &ch.Verdicts[i]
		v.Nodes = ds.nodes(v.Backend)
		if g := ds.peak(v.Backend, workload); g != nil {
			v.Throughput, v.Clients, v.P99US = g.Throughput, g.Clients, g.Latency.P99
		}
	}
	slices.SortStableFunc(ch.Verdicts, func(a, b Verdict) int {
		if a.Qualifies != b.Qualifies {
			if a.Qualifies {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.Throughput, a.Throughput), cmp.Compare(a.Backend, b.Backend))
	})
	if !ch.Judgeable || len(ch.Verdicts) == 0 || !ch.Verdicts[0].Qualifies || (needSpeed && ch.Verdicts[0].Throughput <= 0) {
		return workload
	}
	best := ch.Verdicts[0]
	for _, v := range ch.Verdicts[1:] {
		if !v.Qualifies || v.Throughput < (1-closeEnough)*ch.Verdicts[0].Throughput {
			continue
		}
		if cheaper(v.Nodes, best.Nodes) || (v.Nodes == best.Nodes && v.P99US > 0 && v.P99US < best.P99US) {
			best = v
		}
	}
	ch.Backend = best.Backend
	return workload
}

// cheaper reports whether node count a is lower than b.
func cheaper(a, b int) bool { return a < b }

func violationText(t group) string {
	var parts []string
	for _, x := range []struct {
		n    int64
		what string
	}{{t.Overlaps, "overlap"}, {t.StaleAccepted, "stale write accepted"}, {t.LostUpdates, "lost update"}, {t.TokenRegressions, "token regression"}} {
		if x.n > 0 {
			parts = append(parts, plural(x.n, x.what))
		}
	}
	return strings.ReplaceAll(strings.Join(parts, ", "), "stale write accepteds", "stale writes accepted")
}

func (ds *dataset) efficiency() Choice {
	ch := Choice{Judgeable: true}
	if len(ds.find(group{Fault: faultNone})) == 0 {
		ch.Judgeable = false
		ch.Missing = append(ch.Missing, `cases without faults (fault "none")`)
	}
	for _, b := range ds.Backends {
		v := Verdict{Backend: b}
		gs := ds.find(group{Backend: b, Fault: faultNone})
		t := totals(gs)
		maxClients := 0
		for _, g := range gs {
			maxClients = max(maxClients, g.Clients)
		}
		switch {
		case len(gs) == 0:
			v.Reason = "not run without faults"
		case maxClients < 2:
			v.Reason = "only run with 1 client without faults: a double grant could not show"
		case t.Acquired == 0:
			v.Reason = "acquired no lock without faults"
		case t.violations() > 0:
			v.Reason = "without faults: " + violationText(t)
		default:
			v.Qualifies = true
			v.Reason = fmt.Sprintf("no violation in %s without faults (up to %d clients)", plural(int64(t.Cases), "case"), maxClients)
		}
		ch.Verdicts = append(ch.Verdicts, v)
	}
	return ch
}

func (ds *dataset) efficiencyAnswer(ch Choice, workload string) string {
	switch {
	case !ch.Judgeable:
		return "This run cannot recommend a lock for efficiency: it has no " + joinAnd(ch.Missing) + "."
	case ch.Backend == "":
		for _, v := range ch.Verdicts {
			if v.Qualifies {
				return "Backends qualify, but none has a fault-free throughput on the reference workload, so none can be ranked."
			}
		}
		return "No backend qualifies for efficiency locks: every one either counted violations without faults or was not run with enough clients to show them (see the table)."
	}
	v := verdictOf(ch, ch.Backend)
	s := fmt.Sprintf("Use %s: it is the %s backend with zero violations without faults — %s grants/s at %d clients on workload %s, acquire p99 %s, %s.",
		v.Backend, speedWord(ch, v), fmtRate(v.Throughput), v.Clients, workload, fmtUS(float64(v.P99US)), nodesText(v.Nodes))
	return s + runnerUp(ch)
}

// speedWord says why the choice won: fastest, or cheap and close to it.
func speedWord(ch Choice, v Verdict) string {
	if ch.Verdicts[0].Backend == v.Backend {
		return "fastest"
	}
	return fmt.Sprintf("cheapest (within %.0f%% of the fastest, %s)", closeEnough*100, ch.Verdicts[0].Backend)
}

func runnerUp(ch Choice) string {
	for _, v := range ch.Verdicts {
		if v.Qualifies && v.Backend != ch.Backend && v.Throughput > 0 {
			return fmt.Sprintf(" Next: %s, %s grants/s, p99 %s, %s.", v.Backend, fmtRate(v.Throughput), fmtUS(float64(v.P99US)), nodesText(v.Nodes))
		}
	}
	return ""
}

func verdictOf(ch Choice, backend string) Verdict {
	for _, v := range ch.Verdicts {
		if v.Backend == backend {
			return v
		}
	}
	return Verdict{Backend: backend}
}

// isNodeFault reports whether a fault acts on the lock's servers rather
// than on the client (every fault but "none" and "client-pause").
func isNodeFault(f string) bool { return f != faultNone && f != faultPause && f != unsetLabel }

func (ds *dataset) correctness() Choice {
	ch := Choice{Judgeable: true}
	fenced := ds.find(group{Guard: guardFence})
	hasPause := slices.ContainsFunc(fenced, func(g *group) bool { return g.Fault == faultPause })
	hasNode := slices.ContainsFunc(fenced, func(g *group) bool { return isNodeFault(g.Fault) })
	if !hasPause {
		ch.Judgeable = false
		ch.Missing = append(ch.Missing, `fenced (guard "fence") cases under "client-pause"`)
	}
	if !hasNode {
		ch.Judgeable = false
		ch.Missing = append(ch.Missing, `fenced cases under a node fault (failover, restart, crash-minority, ...)`)
	}
	for _, b := range ds.Backends {
		v := Verdict{Backend: b}
		fs := ds.find(group{Backend: b, Guard: guardFence})
		var faults, bad []string
		for _, f := range ds.Faults {
			gs := ds.find(group{Backend: b, Guard: guardFence, Fault: f})
			if len(gs) == 0 {
				continue
			}
			faults = append(faults, f)
			t := totals(gs)
			t.Overlaps = 0 // allowed with fencing
			if t.violations() > 0 {
				bad = append(bad, violationText(t)+" under "+f)
			}
		}
		t := totals(fs)
		switch {
		case len(fs) == 0:
			v.Reason = "never run with fencing"
		case !t.Fencing:
			v.Reason = "issues no fencing tokens: its fenced cases ran without token checks"
		case len(bad) > 0:
			v.Reason = "with fencing: " + strings.Join(bad, "; ")
		case !slices.Contains(faults, faultPause):
			v.Reason = "not run with fencing under client-pause"
		case !slices.ContainsFunc(faults, isNodeFault):
			v.Reason = "not run with fencing under any node fault"
		default:
			v.Qualifies = true
			v.Reason = fmt.Sprintf("with fencing: no stale write accepted, no lost update and no token regression under %s (%s rejected)",
				joinAnd(faults), plural(t.StaleRejected, "stale write"))
			if t.Unfenced {
				v.Reason += "; some fenced cases ran without token checks"
			}
		}
		v.Fencing = ds.fencingNeed(b)
		ch.Verdicts = append(ch.Verdicts, v)
	}
	return ch
}

// fencingNeed says whether a backend needed fencing, with the evidence.
func (ds *dataset) fencingNeed(backend string) string {
	var evidence []string
	for _, f := range ds.Faults {
		if t := totals(ds.find(group{Backend: backend, Guard: guardNone, Fault: f})); t.StaleAccepted+t.LostUpdates > 0 {
			evidence = append(evidence, fmt.Sprintf("without fencing %s under %s", violationText(group{StaleAccepted: t.StaleAccepted, LostUpdates: t.LostUpdates}), f))
		}
		if t := totals(ds.find(group{Backend: backend, Fault: f})); t.Overlaps > 0 {
			evidence = append(evidence, fmt.Sprintf("%s under %s", plural(t.Overlaps, "overlap"), f))
		}
	}
	switch {
	case len(evidence) > 0:
		return "required: " + strings.Join(evidence, "; ")
	case len(ds.find(group{Backend: backend, Guard: guardNone, Fault: faultPause})) > 0:
		return "not shown necessary by this run: no unfenced run accepted a stale write and the lock never overlapped"
	}
	return "unknown: not run without fencing under client-pause"
}

func (ds *dataset) correctnessAnswer(ch Choice) string {
	if !ch.Judgeable {
		return "This run cannot recommend a lock for correctness: it lacks " + joinAnd(ch.Missing) +
			". Rerun with those faults and --fencing before trusting any backend with correctness."
	}
	if ch.Backend == "" {
		return "No backend qualifies for correctness locks in this run: each one issued no tokens, accepted a stale write, lost an update or saw a token regression with fencing on, or was not run under the faults needed (see the table)."
	}
	v := verdictOf(ch, ch.Backend)
	var missing []string
	for _, f := range ds.Faults {
		if f != faultNone && len(ds.find(group{Fault: f, Guard: guardFence})) > 0 && len(ds.find(group{Backend: v.Backend, Fault: f, Guard: guardFence})) == 0 {
			missing = append(missing, f)
		}
	}
	s := fmt.Sprintf("Use %s with its fencing tokens checked by the resource. It is the %s backend whose fenced runs had %s. Fencing %s. Cost: %s, %s grants/s at %d clients, acquire p99 %s.",
		v.Backend, speedWord(ch, v), strings.TrimPrefix(v.Reason, "with fencing: "), v.Fencing, nodesText(v.Nodes),
		fmtRate(v.Throughput), v.Clients, fmtUS(float64(v.P99US)))
	if v.Throughput <= 0 {
		s = fmt.Sprintf("Use %s with its fencing tokens checked by the resource. Its fenced runs had %s. Fencing %s. Its fault-free speed was not measured.",
			v.Backend, strings.TrimPrefix(v.Reason, "with fencing: "), v.Fencing)
	}
	if len(missing) > 0 {
		s += fmt.Sprintf(" Not run with fencing under %s, which other backends were: the recommendation does not cover those faults.", joinAnd(missing))
	}
	return s + runnerUp(ch)
}
