package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// minSpeedTrials is the fewest trials a side with which the speed test
// could set one backend apart at all, were it the only comparison: a
// complete separation of 3 against 3 has p = 1/C(6,3) = 5%. A family of
// many comparisons needs more (see separation and SamplesToSeparate).
const minSpeedTrials = 3

// Availability differences count only past these margins, which are
// part of the tested hypothesis (the samples are shifted by them): a
// tenth of the baseline in the in-fault grant share, a second of
// recovery. A difference a user would not notice must not outrank
// speed, however sure the test is of it.
const (
	shareMargin    = 0.10
	recoveryMargin = 1.0
)

// Rules states the recommendation rules as the report applies them; the
// report prints them under the recommendation, and the tests hold the
// code to them.
var Rules = []string{
	"Rule 1, evidence. Only valid cases count: a case whose fault failed to inject as planned is invalid, excluded from every table, chart and conclusion, and listed with its reason. Only tested injections count: an injection that met nothing it could test (no held key at the strike, a lock that was not granting) or whose effect could not be read back enters no rate, and is counted apart with why. Every safety number is a count in a number of trials with its exact one-sided 95% upper bound (Clopper–Pearson; zero in n gives 1 − 0.05^(1/n)): under a fault, the tested injections followed by at least one such event (an injection is a trial, however many incidents follow it); without one, the events per contended grant (a grant made while another client of the key waited, where a double grant could happen). Bounds are per backend, fault class and durability profile, never pooled across classes. A zero is never written without its bound, and a count in no trial is \"not judged\".",
	"Rule 2, scope. A backend faced a fault class when it has a valid case under it. A class a backend was not put through is \"not judged\" for it, with the reason (the run's record, the report's table of classes that cannot apply, or that the results do not say) — never a pass, and the recommendation names the classes it does not cover. Qualifying backends are ranked only on the fault classes every one of them faced: what one showed under a class another did not face decides nothing between them. The noop control excludes nobody and never qualifies.",
	"Rule 3, correctness locks (a double grant corrupts data). Incidents are judged against each lock's declared contract — the earlier grant keeps the key until its Acquire was called plus the TTL less the drift the backend declares (or its session timeout) — not against the validity its leases report: a lock bug when the later grant came, for certain, before that line; an expired holder when, for certain, after it; ambiguous when the judge's clock bounds cannot tell. A backend qualifies when it issues fencing tokens (its fenced cases ran with tokens checked); it faced client-pause and at least one server-side fault class with the resource fencing (guard fence or fence-rw), with tested injections in each; it had zero lock-bug incidents — incidents the judge did not classify count as lock bugs — in every valid case of every class, guard and durability profile, stated per class with its bound; with fencing — the strongest token check each case was judged under: fence-rw (reads and writes carry the token) where the case ran it, else fence (writes only, which lets a superseded holder's late write in while its successor has not written yet: the resource's weakness, shown under guard fence, not the lock's) — it let through zero stale writes, lost zero updates and saw zero token regressions; and porcupine's fenced-mutex check is true on every one of its histories (unknown is not a pass). Expired-holder incidents do not disqualify — they are what fencing is for — but they are counted, explained, and make fencing \"required\", as does any stale write accepted or update lost without fencing. Ambiguous incidents do not disqualify either, since nothing shows they were lock bugs; they are counted and shown beside the verdict.",
	"Rule 4, efficiency locks (an occasional double grant is tolerable). A backend qualifies when it ran without faults with at least 2 clients, acquired locks, and without faults had zero incidents of any kind, zero stale writes accepted and zero lost updates, stated per contended grant with its bound. Under faults its double grants are tolerated but counted, per class, and they rank it (rule 5).",
	"Rule 5, ranking, in this order, among the qualifying backends and on the classes they all faced. A step sets a backend apart only when a test says so: the one-sided Wilcoxon–Mann–Whitney rank-sum test, exact on the permutations of the two samples (ties included; on the 0/1 samples of injections it is Fisher's exact test), and every comparison the ranking makes for one answer — each ordered pair of qualifiers, under each compared class (and profile, for safety), on each measure below — forms one family held to a 5% family-wise error rate by Tarone's modified Bonferroni correction (each comparison at 5% divided by the number of comparisons whose samples could reach that level at all): the chance that any backend is set apart by a difference that is not there is at most 5% per answer. With 3 fault windows a side the smallest p-value is 1/20, so nothing is set apart by 3 windows in a family of more than one comparison; the answer says how many samples a side the test would need. (1) Safety, for efficiency: a backend drops out when, under some compared class and profile, the test finds its tested injections followed by a double-grant incident more frequent than another's, and under none the reverse; for correctness every qualifier has zero lock bugs and zero stale writes accepted, and zeros cannot be told apart, so safety ranks them no further. (2) Availability, for both questions: a backend drops out when, under some compared class, the test finds its in-fault grant rate (a share of its own baseline, one sample per fault window) below another's by more than 10 points, or its recovery times (one per window) above another's by more than 1 s — the margins are part of the tested hypothesis — and under no compared class the reverse. (3) Speed decides only among the backends left: peak fault-free throughput on the reference workload and durability profile (the ones the most backends ran, many keys rather than the hot key on a tie — on one hot key the 1 ms hold caps every lock near 1,000 grants/s and measures the hold, not the lock — under the guard most ran there), the median over trials with its min–max; a backend drops out only when the test finds its trials slower than another's, both from independent trials (on fresh servers: trials that share servers count as one and are not compared) — otherwise they are \"indistinguishable here\". (4) Cost breaks what is left: fewer nodes; backends that still tie are recommended alike (the evidence shown is the first's by name), and those that need more nodes are named as tied but costlier. When a tie remains, the answer says what would settle it: how many samples a side the test needs at this answer's level, against those the run had.",
	"Rule 6, durability. Every case carries its profile (fast: no fsync; durable: every write synced; the control has no servers), and so do the header, every table row and the answer. A lock bug under any profile disqualifies, and the reason names the profile. Speed is compared within one profile.",
}

// Verdict is one backend's standing under one recommendation question.
type Verdict struct {
	Backend   string
	Qualifies bool
	// Reason says why, with the numbers and their bounds.
	Reason string
	// Standing says how a qualifying backend fared in the ranking:
	// recommended, tied with the recommendation, or the step that set it
	// apart, with the evidence.
	Standing string
	Nodes    int
	// Throughput is the peak fault-free grants/s on the reference
	// workload (the median over Trials trials, ThroughputMin–Max their
	// range; 0 when the backend did not run it), reached at Clients with
	// acquire p99 P99US, under profile Durability.
	Throughput, ThroughputMin, ThroughputMax float64
	Trials, Clients                          int
	P99US                                    int64
	Durability                               string
	// Fencing says, for correctness verdicts, whether fencing was needed
	// and the evidence.
	Fencing string
	// Faced are the fault classes it faced; NotJudged the classes others
	// faced and it did not, each with why.
	Faced, NotJudged []string
	// brief is Standing in a few words, for the answer.
	brief string
}

// Choice answers one question: which backend, or why none.
type Choice struct {
	// Backend is the recommended backend; empty when none qualifies or
	// the run cannot judge.
	Backend string
	// Tied are the qualifying backends the evidence could not tell apart
	// from Backend on safety, availability or speed: the choice among
	// them fell to cost.
	Tied []string
	// Alike are the backends of Tied that need as many nodes as Backend:
	// nothing measured, and no cost, puts one before the other, so they
	// are recommended with it.
	Alike []string
	// Judgeable is false when the run lacks the cases the question needs.
	Judgeable bool
	// Answer is the recommendation in a sentence; Evidence the numbers
	// behind it, one line each.
	Answer   string
	Evidence []string
	// Missing names the cases the run would need to judge.
	Missing []string
	// Compared are the fault classes the qualifying backends were
	// compared on: the ones every one of them faced.
	Compared []string
	// Verdicts rank every backend: the recommendation first, then the
	// others that qualified, then the rest.
	Verdicts []Verdict
	// sep is the ranking's family of comparisons and the test's
	// verdicts; nil when nothing was ranked.
	sep *separation
}

// Recommendation is what the measurements support for the two uses of a
// distributed lock, with the caveats they exposed.
type Recommendation struct {
	// Workload and Durability are the reference workload and profile
	// speeds were compared on.
	Workload, Durability string
	Efficiency           Choice
	Correctness          Choice
	Caveats              []string
	// Invalid lists the cases excluded because their fault failed to
	// inject, one line each.
	Invalid []string
}

// Recommend derives the recommendation from f by the Rules. It never
// fails: an empty or partial file yields choices that say what is
// missing.
func Recommend(f *results.File) *Recommendation { return analyse(f).recommend() }

// question is one of the two uses a recommendation answers.
type question int

const (
	forEfficiency question = iota
	forCorrectness
)

func (ds *dataset) recommend() *Recommendation {
	r := &Recommendation{}
	r.Workload, r.Durability = ds.reference()
	r.Efficiency = ds.efficiency()
	r.Correctness = ds.correctness()
	ds.rank(&r.Efficiency, forEfficiency, r.Workload, r.Durability)
	ds.rank(&r.Correctness, forCorrectness, r.Workload, r.Durability)
	r.Efficiency.Answer, r.Efficiency.Evidence = ds.answer(r.Efficiency, forEfficiency, r.Workload)
	r.Correctness.Answer, r.Correctness.Evidence = ds.answer(r.Correctness, forCorrectness, r.Workload)
	r.Caveats = ds.caveats()
	for _, c := range ds.Invalid {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%s under %s (guard %s, %s, trial %d): %s",
			c.Backend, c.Fault, c.Guard, orUnset(c.Durability, durabilityUnset), c.Trial, orUnset(c.InvalidReason, "no reason recorded")))
	}
	return r
}

// reference returns the workload and durability profile speeds are
// compared on: among the real locks' fault-free cases, the ones the most
// backends ran, preferring many keys to the hot key on a tie (on one hot
// key a 1 ms hold caps every lock near 1,000 grants/s: the hold is
// measured, not the lock), then the first by name.
func (ds *dataset) reference() (workload, durability string) {
	most, manyKeys := 0, false
	for _, w := range ds.workloadsUnder(faultNone) {
		for _, d := range ds.Durabilities {
			n := 0
			for _, b := range ds.realBackends() {
				if len(ds.find(query{Backend: b, Workload: w, Fault: faultNone, Durability: d})) > 0 {
					n++
				}
			}
			if many := w != workloadHot; n > most || (n == most && many && !manyKeys) {
				workload, durability, most, manyKeys = w, d, n, many
			}
		}
	}
	return workload, durability
}

// peak returns the fastest fault-free group of a backend on a workload
// and profile, under the guard most backends ran there (the one the
// summary table and charts show), or under any guard when the backend
// lacks that one.
func (ds *dataset) peak(backend, workload, durability string) *group {
	for _, guard := range []string{ds.primaryGuard(workload, faultNone), ""} {
		var best *group
		for _, g := range ds.find(query{Backend: backend, Workload: workload, Fault: faultNone, Guard: guard, Durability: durability}) {
			if g.Clients > 0 && g.Acquired > 0 && (best == nil || g.Throughput > best.Throughput) {
				best = g
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// rank fills the verdicts' speed and cost, applies the ranking rule to
// the qualifying backends on the classes they all faced, and orders the
// verdicts: the choice, the tied, the other qualifiers, the rest.
func (ds *dataset) rank(ch *Choice, q question, workload, durability string) {
	peaks := map[string]*group{}
	for i := range ch.Verdicts {
		v := &ch.Verdicts[i]
		v.Nodes = ds.nodes(v.Backend)
		v.Faced = ds.classesOf(v.Backend)
		v.NotJudged = ds.notJudgedClasses(v.Backend)
		if g := ds.peak(v.Backend, workload, durability); g != nil {
			peaks[v.Backend] = g
			v.Throughput, v.ThroughputMin, v.ThroughputMax = g.Throughput, g.ThroughputMin, g.ThroughputMax
			v.Trials, v.Clients, v.P99US, v.Durability = g.Trials, g.Clients, g.Latency.P99, g.profile()
		}
	}
	var tier []string
	for _, v := range ch.Verdicts {
		if v.Qualifies {
			tier = append(tier, v.Backend)
		}
	}
	standing, brief := map[string]string{}, map[string]string{}
	if ch.Judgeable && len(tier) > 0 {
		ch.Compared = ds.commonClasses(tier)
		ch.sep = ds.separate(tier, ch.Compared, peaks, q)
		if q == forEfficiency {
			tier = ds.bySafety(ch.sep, tier, standing, brief)
		}
		tier = ds.byAvailability(ch.sep, tier, standing, brief)
		tier = bySpeed(ch.sep, tier, peaks, standing, brief)
		slices.SortFunc(tier, func(a, b string) int { return cmp.Or(cmp.Compare(ds.nodes(a), ds.nodes(b)), cmp.Compare(a, b)) })
		ch.Backend, ch.Tied = tier[0], tier[1:]
		standing[ch.Backend] = "recommended"
		for _, b := range ch.Tied {
			if ds.nodes(b) == ds.nodes(ch.Backend) {
				ch.Alike = append(ch.Alike, b)
				standing[b] = "recommended alike with " + ch.Backend + ": the evidence does not tell them apart on safety, availability or speed, and they need as many nodes"
			} else {
				standing[b] = fmt.Sprintf("tied with %s: the evidence does not tell them apart on safety, availability or speed; %s", ch.Backend, costWord(ds, ch.Backend, b))
			}
		}
	}
	order := func(v Verdict) int {
		switch {
		case v.Backend == ch.Backend:
			return 0
		case slices.Contains(ch.Tied, v.Backend):
			return 1
		case v.Qualifies:
			return 2
		}
		return 3
	}
	for i := range ch.Verdicts {
		ch.Verdicts[i].Standing = standing[ch.Verdicts[i].Backend]
		ch.Verdicts[i].brief = brief[ch.Verdicts[i].Backend]
	}
	slices.SortStableFunc(ch.Verdicts, func(a, b Verdict) int {
		return cmp.Or(cmp.Compare(order(a), order(b)), cmp.Compare(b.Throughput, a.Throughput), ds.compareBackends(a.Backend, b.Backend))
	})
}

// costWord says why the cost rule put chosen before other, which needs
// more nodes.
func costWord(ds *dataset, chosen, other string) string {
	return fmt.Sprintf("%s needs fewer nodes than %s (%d vs %d)", chosen, other, ds.nodes(chosen), ds.nodes(other))
}

// commonClasses returns the fault classes (other than none) that every
// one of the backends faced.
func (ds *dataset) commonClasses(backends []string) []string {
	var out []string
	for _, cls := range ds.Classes {
		if cls == faultNone {
			continue
		}
		all := true
		for _, b := range backends {
			all = all && len(ds.find(query{Backend: b, Class: cls})) > 0
		}
		if all {
			out = append(out, cls)
		}
	}
	return out
}

// evidenceOn sums a backend's groups under the given classes, under
// every guard.
func (ds *dataset) evidenceOn(backend string, classes []string) group {
	return ds.evidenceUnder(backend, classes, "")
}

// evidenceUnder sums a backend's groups under the given classes and
// guard ("" for every guard).
func (ds *dataset) evidenceUnder(backend string, classes []string, guard string) group {
	var gs []*group
	for _, cls := range classes {
		gs = append(gs, ds.find(query{Backend: backend, Class: cls, Guard: guard})...)
	}
	return totals(gs)
}

// bySafety drops the backends whose double-grant incidents per tested
// injection the test finds higher than another's under some compared
// class and profile, and lower under none (rule 5 (1), efficiency).
// Classes are compared one by one, never pooled: a class that defeats
// every lock says nothing about one that defeats none.
func (ds *dataset) bySafety(sep *separation, tier []string, standing, brief map[string]string) []string {
	keep, by := sep.setApart(stepSafety, tier)
	for b, c := range by {
		rate := func(backend string) bound {
			return rateOf(totals(ds.find(query{Backend: backend, Class: c.class, Durability: c.profile})), kindIncident, c.class)
		}
		x, y := rate(b), rate(c.better)
		standing[b] = fmt.Sprintf("set apart on safety: under %s (%s profile) the tested injections with a double-grant incident, %s, lie above %s's, %s (%s)",
			c.class, c.profile, x, c.better, y, sep.testWords(c))
		brief[b] = fmt.Sprintf("safety under %s: double-grant incidents %s vs %s's %s", c.class, x.cell(), c.better, y.cell())
	}
	return keep
}

// availability is a backend's service under one fault class: the
// in-fault grant rate as a fraction of its baseline, and recovery times.
type availability struct{ inFault, recovery stats.Spread }

func (ds *dataset) availabilityOf(backend, class string) availability {
	t := totals(ds.find(query{Backend: backend, Class: class}))
	return availability{inFault: stats.SpreadOf(t.InFault), recovery: stats.SpreadOf(t.Recovery)}
}

// byAvailability drops the backends another one beats on availability
// under some compared class and loses to under none (rule 5 (2)): beats
// by more than the margins (shareMargin, recoveryMargin), as the test
// finds it over the fault windows. When that would drop every backend
// (no clear order), it drops none.
func (ds *dataset) byAvailability(sep *separation, tier []string, standing, brief map[string]string) []string {
	keep, by := sep.setApart(stepAvailability, tier)
	for b, c := range by {
		x, y := ds.availabilityOf(c.better, c.class), ds.availabilityOf(b, c.class)
		margin := fmt.Sprintf("its in-fault share lies below %s's by more than %.0f points", c.better, shareMargin*100)
		if c.measure == "recovery" {
			margin = fmt.Sprintf("its recovery lies above %s's by more than %s s", c.better, fmtSeconds(recoveryMargin))
		}
		standing[b] = fmt.Sprintf("set apart on availability: under %s it served %s of its baseline and recovered in %s, %s served %s and recovered in %s; %s (%s)",
			c.class, spreadPct(y.inFault), spreadSeconds(y.recovery), c.better, spreadPct(x.inFault), spreadSeconds(x.recovery), margin, sep.testWords(c))
		brief[b] = fmt.Sprintf("availability under %s: %s of baseline, recovery %s, vs %s's %s, %s", c.class,
			fmtPct(y.inFault.Median), spreadSeconds(stats.Spread{N: 1, Median: y.recovery.Median}), c.better, fmtPct(x.inFault.Median), spreadSeconds(stats.Spread{N: 1, Median: x.recovery.Median}))
	}
	return keep
}

// bySpeed drops the backends whose peak throughput the test finds lower
// than another's (rule 5 (3)). Only independent trials (each on fresh
// servers) are samples: trials that share servers count as one, and one
// trial a side can set nothing apart. A backend without a fault-free
// speed cannot be called slower, and stays.
func bySpeed(sep *separation, tier []string, peaks map[string]*group, standing, brief map[string]string) []string {
	keep, by := sep.setApart(stepSpeed, tier)
	for b, c := range by {
		g, f := peaks[b], peaks[c.better]
		standing[b] = fmt.Sprintf("set apart on speed: %s grants/s against %s's %s, over %d and %d independent trials (%s)",
			spreadRate(g.Speed), c.better, spreadRate(f.Speed), g.Speed.N, f.Speed.N, sep.testWords(c))
		brief[b] = fmt.Sprintf("speed: %s vs %s's %s grants/s", spreadRate(g.Speed), c.better, spreadRate(f.Speed))
	}
	return keep
}

// spreadRate is "4.1k (3.9k–4.3k)", or "4.1k (1 trial)".
func spreadRate(s stats.Spread) string {
	switch {
	case s.N == 0:
		return "not measured"
	case s.N == 1:
		return fmtRate3(s.Median) + " (1 trial)"
	}
	return fmt.Sprintf("%s (%s–%s)", fmtRate3(s.Median), fmtRate3(s.Min), fmtRate3(s.Max))
}

// spreadPct is "62% (40–71%)" for fractions.
func spreadPct(s stats.Spread) string {
	switch {
	case s.N == 0:
		return "not measured"
	case s.N == 1 || s.Min == s.Max:
		return fmtPct(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtPct(s.Median), strings.TrimSuffix(fmtPct(s.Min), "%"), fmtPct(s.Max))
}

// spreadSeconds is "0.8 s (0.5–1.2 s)"; a recovery that never came is
// "not recovered".
func spreadSeconds(s stats.Spread) string {
	sec := func(v float64) string {
		if v > 1e300 {
			return "never"
		}
		return fmtSeconds(v)
	}
	switch {
	case s.N == 0:
		return "not measured"
	case s.Median > 1e300 && s.Min > 1e300:
		return "not recovered"
	case s.N == 1 || s.Min == s.Max:
		return sec(s.Median) + " s"
	}
	return fmt.Sprintf("%s s (%s–%s s)", sec(s.Median), sec(s.Min), sec(s.Max))
}

// spreadUS is "3.2 ms (2.9–3.8 ms)".
func spreadUS(s stats.Spread) string {
	switch {
	case s.N == 0:
		return "—"
	case s.N == 1 || s.Min == s.Max:
		return fmtUS(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtUS(s.Median), fmtUS(s.Min), fmtUS(s.Max))
}

func verdictOf(ch Choice, backend string) Verdict {
	for _, v := range ch.Verdicts {
		if v.Backend == backend {
			return v
		}
	}
	return Verdict{Backend: backend}
}
