package report

import (
	"cmp"
	_ "embed"
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

// Rules states the recommendation rules as the report applies them, one
// paragraph each of rules.md (embedded); the report prints them under
// the recommendation, and the tests hold the code to them.
var Rules = paragraphs(rulesMD)

//go:embed rules.md
var rulesMD string

// paragraphs returns the paragraphs of a Markdown text, without its
// headings and its first paragraph (what the file is).
func paragraphs(md string) []string {
	var out []string
	for _, p := range strings.Split(strings.TrimSpace(md), "\n\n") {
		p = strings.TrimSpace(p)
		if p != "" && !strings.HasPrefix(p, "#") {
			out = append(out, strings.ReplaceAll(p, "\n", " "))
		}
	}
	if len(out) > 0 {
		out = out[1:]
	}
	return out
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
				standing[b] = "recommended alike with " + ch.Backend + ": the evidence does not tell them apart on safety, availability " +
					"or speed, and they need as many nodes"
			} else {
				standing[b] = fmt.Sprintf("tied with %s: the evidence does not tell them apart on safety, availability or speed; %s",
					ch.Backend, costWord(ds, ch.Backend, b))
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
		standing[b] = fmt.Sprintf("set apart on safety: under %s (%s profile) the tested injections with a double-grant incident, %s, "+
			"lie above %s's, %s (%s)",
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
		standing[b] = fmt.Sprintf("set apart on availability: under %s it served %s of its baseline and recovered in %s, %s served %s "+
			"and recovered in %s; %s (%s)",
			c.class, spreadPct(y.inFault), spreadSeconds(y.recovery), c.better, spreadPct(x.inFault), spreadSeconds(x.recovery),
			margin, sep.testWords(c))
		brief[b] = fmt.Sprintf("availability under %s: %s of baseline, recovery %s, vs %s's %s, %s", c.class,
			fmtPct(y.inFault.Median), spreadSeconds(stats.Spread{N: 1,
				Median: y.recovery.Median}), c.better, fmtPct(x.inFault.Median), spreadSeconds(stats.Spread{N: 1, Median: x.recovery.Median}))
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
