package report

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/results"
)

// charts holds the rendered charts by family, in document order.
type charts struct {
	throughput, latency, cdf, timeline []*chart
	cost, availability, safety         *chart
	// safetyIntent are the safety figures of the answer's intents
	// (efficiency, correctness), each one grid that fits a screen.
	safetyIntent []*chart
	failed       []string
}

// build assembles the report document: the run's reproducibility
// header, the two answers with their evidence, then the charts, the
// tables behind them, what was and was not measured, the invalid cases,
// and the recommendation in full with its rules.
func (ds *dataset) build(cs *charts, rec *Recommendation, o Options) *document {
	d := &document{title: "lockbench report"}
	d.blocks = append(d.blocks, para{text: ds.runLine(), small: true})
	answerSection(d, ds, rec)
	d.blocks = append(d.blocks, contents{})
	ds.header(d)
	ds.chartSection(d, cs)
	ds.speedSection(d, o.LatencyClients)
	ds.safetySection(d)
	ds.availabilitySection(d)
	ds.casesSection(d)
	ds.coverage(d, cs)
	decisionSection(d, ds.File.Answer)
	recommendationSection(d, rec, ds.File.Answer != nil)
	d.h(2, "Files")
	d.p("results.json holds every case with its histograms; each case's operation history is beside it (lockbench check DIR re-checks " +
		"them); results.csv holds one row per case (every trial and host as recorded) with these columns, in this order:")
	d.list(CSVColumns())
	switch {
	case o.NoCharts:
	case o.NoSVG && o.LinkCharts:
		d.p("Each chart is in charts/ as a PNG, which this page links.")
	case o.NoSVG:
		d.p("Each chart is in charts/ as a PNG; this page inlines them.")
	case o.LinkCharts:
		d.p("Each chart is in charts/ as PNG and SVG; this page links the PNGs.")
	default:
		d.p("Each chart is in charts/ as PNG and SVG; this page inlines the PNGs.")
	}
	return d
}

// header is the run's reproducibility header: enough to replay the
// run's schedule and to know what every number was measured on.
func (ds *dataset) header(d *document) {
	f := ds.File
	d.h(2, "Run")
	when := "unknown"
	if !f.Started.IsZero() {
		when = f.Started.UTC().Format(time.RFC3339)
		if !f.Finished.IsZero() && f.Finished.After(f.Started) {
			when += fmt.Sprintf(" to %s (%s)", f.Finished.UTC().Format(time.RFC3339), f.Finished.Sub(f.Started).Round(time.Second))
		}
	}
	seed := "not recorded"
	if f.Seed != 0 || f.RunID != "" {
		seed = strconv.FormatUint(f.Seed, 10) + " (lockbench run --seed " + strconv.FormatUint(f.Seed, 10) + " replays the schedule)"
	}
	machine := orUnset(f.Machine, "not recorded")
	var hw []string
	if f.Cores > 0 {
		hw = append(hw, plural(int64(f.Cores), "core"))
	}
	if f.MemoryBytes > 0 {
		hw = append(hw, fmt.Sprintf("%.1f GiB memory", float64(f.MemoryBytes)/(1<<30)))
	}
	if len(hw) > 0 {
		machine += " — " + strings.Join(hw, ", ")
	}
	versions := "not recorded"
	if len(f.Versions) > 0 {
		var vs []string
		for _, k := range slices.Sorted(maps.Keys(f.Versions)) {
			vs = append(vs, k+" "+f.Versions[k])
		}
		versions = strings.Join(vs, ", ")
	}
	items := []string{
		"Run id: " + orUnset(f.RunID, "not recorded") + "; seed: " + seed + "; suite: " + orUnset(f.Suite, "not recorded (a matrix given by "+
			"flags, or an older file)"),
		"When: " + when,
		"Machine: " + machine + "; load-generator hosts: " + orUnset(strings.Join(f.Hosts, ", "), "not recorded"),
		"Versions: " + versions,
		"Durability profiles: " + ds.durabilityText(),
	}
	if f.Command != "" {
		items = append(items, "Command: "+f.Command)
	}
	maxTrials := 0
	for _, g := range ds.Groups {
		maxTrials = max(maxTrials, g.Trials)
	}
	var clients []string
	for _, c := range ds.Clients {
		clients = append(clients, strconv.Itoa(c))
	}
	partial := "complete"
	if f.Partial {
		partial = "PARTIAL — the run was interrupted before every case ran; missing combinations show as not run"
	}
	items = append(items,
		fmt.Sprintf("Cases: %d valid in %d combinations (up to %s each), %d invalid and excluded; "+
			"%s", len(f.Cases)-len(ds.Invalid), len(ds.Groups), plural(int64(maxTrials), "trial"), len(ds.Invalid), partial),
		"Backends: "+listOrNone(ds.Backends)+"; workloads: "+listOrNone(ds.Workloads)+"; client counts: "+listOrNone(clients),
		"Fault classes: "+listOrNone(ds.Classes)+"; guards: "+listOrNone(ds.Guards),
	)
	d.list(items)
}

// runLine is the run's identity in one line, under the title: the full
// header follows the answer.
func (ds *dataset) runLine() string {
	f := ds.File
	var parts []string
	if f.RunID != "" {
		parts = append(parts, "run "+f.RunID)
	}
	if f.Seed != 0 || f.RunID != "" {
		parts = append(parts, fmt.Sprintf("seed %d", f.Seed))
	}
	if f.Suite != "" {
		parts = append(parts, "suite "+f.Suite)
	}
	if !f.Started.IsZero() {
		parts = append(parts, f.Started.UTC().Format("2006-01-02 15:04 MST"))
	}
	if f.Cores > 0 {
		parts = append(parts, plural(int64(f.Cores), "core"))
	}
	if f.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf("%.0f GiB", float64(f.MemoryBytes)/(1<<30)))
	}
	parts = append(parts, "durability "+strings.Join(ds.Durabilities, " + "))
	if f.Partial {
		parts = append(parts, "PARTIAL RUN")
	}
	return strings.Join(parts, " · ") + " — the full header, with versions, is under \"Run\"."
}

// durabilityText says which profiles the cases ran under and what each
// means, so that no number is read without it.
func (ds *dataset) durabilityText() string {
	meaning := map[string]string{
		"fast":           "fast = no fsync: Redis without persistence, etcd --unsafe-no-fsync, ZooKeeper forceSync=no",
		"durable":        "durable = every write synced: Redis AOF appendfsync always, etcd and ZooKeeper with fsync",
		durabilityUnset:  "not recorded = older files",
		profileNoServers: "no servers = the control, shown beside every profile",
	}
	var parts []string
	for _, p := range ds.Durabilities {
		n := len(ds.find(query{Durability: p}))
		m := meaning[p]
		if m == "" {
			m = p
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", m, plural(int64(n), "combination")))
	}
	return listOrNone(parts)
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// answerSection opens the report with the two recommendations and their
// evidence.
func answerSection(d *document, ds *dataset, rec *Recommendation) {
	d.h(2, "The answer")
	s := "Derived from the numbers below by the rules stated under \"Recommendation in full\"; nothing is written in advance. Safety " +
		"numbers are counts with their 95% upper bounds; speeds are medians over trials with their ranges."
	if a := ds.File.Answer; a != nil {
		d.blocks = append(d.blocks, answers{items: decisionBoxes(a)})
		s = "Decided on the evidence below by the procedure stated under \"How the answer is decided\" (results.json holds it as data, under " +
			"answer); the tables under \"Evidence per backend\" show each backend's standing."
		if len(ds.File.Envelopes) == 0 {
			s += " " + EnvelopesLeft
		}
	} else {
		d.blocks = append(d.blocks, answers{items: []answerBox{
			{"For efficiency — a rare double grant is tolerable", rec.Efficiency.Answer, rec.Efficiency.Evidence},
			{"For correctness — a double grant corrupts data", rec.Correctness.Answer, rec.Correctness.Evidence},
		}})
	}
	if n := len(rec.Invalid); n > 0 {
		s += fmt.Sprintf(" %s excluded (listed under \"Invalid cases\").", plural(int64(n), "invalid case"))
	}
	if len(ds.File.Cases) == 0 {
		s = "The results file has no cases: nothing was measured, so there is nothing to chart or recommend."
	}
	d.p(s)
}

// chartSection places the charts, each with its reading guide.
func (ds *dataset) chartSection(d *document, cs *charts) {
	d.h(2, "Charts")
	if len(ds.Groups) == 0 {
		d.p("No charts: the results file has no valid cases.")
	}
	if len(cs.throughput) > 0 {
		d.h(3, "Throughput vs clients")
	}
	for _, c := range cs.throughput {
		d.figure(c)
	}
	if cs.cost != nil {
		d.h(3, "Each lock's own cost")
		d.figure(cs.cost)
	}
	if len(cs.latency)+len(cs.cdf) > 0 {
		d.h(3, "Acquire latency")
	}
	for i := range cs.latency {
		d.figure(cs.latency[i])
		if i < len(cs.cdf) {
			d.figure(cs.cdf[i])
		}
	}
	for i := len(cs.latency); i < len(cs.cdf); i++ {
		d.figure(cs.cdf[i])
	}
	if cs.availability != nil {
		d.h(3, "Availability under faults")
		d.figure(cs.availability)
	}
	if cs.safety != nil || len(cs.safetyIntent) > 0 {
		d.h(3, "Safety")
	}
	for _, c := range cs.safetyIntent {
		d.figure(c)
	}
	if cs.safety != nil {
		if len(cs.safetyIntent) > 0 {
			d.p("Every guard the run judged, each a panel of its own:")
		}
		d.figure(cs.safety)
	}
	if len(cs.timeline) > 0 {
		d.h(3, "Timelines around faults")
	} else if len(ds.Groups) > 0 {
		d.p("No timeline charts: no case under a fault other than \"none\" recorded a timeline.")
	}
	for _, c := range cs.timeline {
		d.figure(c)
	}
}

// coverage shows which fault class × backend combinations ran, with
// which guards, why the others were not judged, and every problem found
// in the input.
func (ds *dataset) coverage(d *document, cs *charts) {
	d.h(2, "What was measured")
	if len(ds.Groups)+len(ds.Invalid) == 0 {
		d.strong("The results file has no cases: nothing was measured, so there is nothing to chart or recommend.")
	} else {
		d.p("Guards run for each fault class (row) and backend (column), over every valid case. \"not judged\" marks a class a backend was not " +
			"put through; the reasons follow the table. A class not judged is never a pass: every conclusion is limited to what ran.")
		t := table{header: append([]string{"fault class"}, ds.Backends...)}
		var reasons []string
		for _, cls := range ds.Classes {
			row := []string{cls}
			for _, b := range ds.Backends {
				var guards []string
				for _, g := range ds.Guards {
					if len(ds.find(query{Backend: b, Class: cls, Guard: g})) > 0 {
						guards = append(guards, g)
					}
				}
				cell := strings.Join(guards, ", ")
				if cell == "" {
					cell = "not judged"
					reasons = append(reasons, fmt.Sprintf("%s × %s: %s", b, cls, strings.TrimPrefix(ds.notJudged(b, cls), "not judged: ")))
				}
				row = append(row, cell)
			}
			t.rows = append(t.rows, row)
		}
		d.table(t)
		if len(reasons) > 0 {
			d.p("Why each blank was not judged:")
			d.list(reasons)
		}
	}
	if len(ds.Invalid) > 0 {
		d.h(3, "Invalid cases")
		d.p("A fault that failed to inject as planned invalidates its case: it did not measure what its name promises. These cases are " +
			"excluded from every table, chart and conclusion above.")
		t := table{header: []string{"backend", "fault", "guard", "durability", "clients", "trial", "why invalid"}, numeric: []bool{false,
			false, false, false, true, true, false}}
		for _, c := range ds.Invalid {
			t.rows = append(t.rows, []string{c.Backend, c.Fault, c.Guard, orUnset(c.Durability, durabilityUnset), strconv.Itoa(c.Clients),
				strconv.Itoa(c.Trial), orUnset(c.InvalidReason, "no reason recorded")})
		}
		d.table(t)
	}
	problems := append([]string{}, ds.Problems...)
	for _, f := range cs.failed {
		problems = append(problems, "chart not drawn: "+f)
	}
	if len(problems) > 0 {
		d.p("Problems in the input (each was worked around as described):")
		d.list(problems)
	}
}

// Notes in a table cell: the first few, each cut short; the rest are in
// results.json.
const (
	cellNotes    = 3
	cellNoteRune = 200
)

// brief joins the first cellNotes notes, each cut to cellNoteRune runes,
// and says how many more there are.
func brief(notes []string) string {
	var out []string
	for _, n := range notes[:min(len(notes), cellNotes)] {
		if r := []rune(n); len(r) > cellNoteRune {
			n = string(r[:cellNoteRune]) + "…"
		}
		out = append(out, n)
	}
	if more := len(notes) - cellNotes; more > 0 {
		out = append(out, fmt.Sprintf("(%d more in results.json)", more))
	}
	return strings.Join(out, "; ")
}

// recommendationSection states every backend's standing under each
// question. With a decided answer (decided) it is the evidence only: the
// answer at the top is the one answer, and this section neither marks a
// backend recommended nor states the report's older rules, which would
// give a second answer that can differ from it.
func recommendationSection(d *document, rec *Recommendation, decided bool) {
	if decided {
		d.h(2, "Evidence per backend")
		d.p("Every backend's standing under each question, in counts and bounds: the evidence the answer at the top was decided on " +
			"by the procedure under \"How the answer is decided\".")
	} else {
		d.h(2, "Recommendation in full")
		d.p("Every backend's standing under each question, derived from the numbers above by the rules at the end of this section.")
	}
	for _, q := range []struct {
		title   string
		ch      Choice
		fencing bool
	}{
		{"Locks for efficiency (a rare double grant is tolerable)", rec.Efficiency, false},
		{"Locks for correctness (a double grant corrupts data)", rec.Correctness, true},
	} {
		d.h(3, q.title)
		if !decided {
			d.strong(q.ch.Answer)
		}
		if len(q.ch.Missing) > 0 {
			d.p("Missing to judge: " + joinAnd(q.ch.Missing) + ".")
		}
		if len(q.ch.Compared) > 0 {
			d.p("Qualifying backends were compared on the fault classes all of them faced: " + joinAnd(q.ch.Compared) + ".")
		}
		d.table(verdictTable(q.ch, q.fencing, !decided))
	}
	d.h(3, "Caveats the measurements exposed")
	if len(rec.Caveats) == 0 {
		d.p("No caveat was found in the counts.")
	}
	d.list(rec.Caveats)
	if decided {
		return
	}
	d.h(3, "Rules")
	d.list(Rules)
}

// decisionSection states how the answer at the top was decided, when the
// run holds one (results.File.Answer), from decision.md (embedded).
func decisionSection(d *document, a *results.Answer) {
	if a == nil {
		return
	}
	d.h(2, "How the answer is decided")
	d.list(paragraphs(decisionMD))
}

//go:embed decision.md
var decisionMD string

// verdictTable is one question's table; marked sets "yes — recommended"
// on the report's own pick.
func verdictTable(ch Choice, fencing, marked bool) table {
	t := table{header: []string{"backend", "qualifies", "why", "ranking", "nodes", "peak grants/s (median, min–max)",
		"at clients", "p99 there", "not judged"},
		numeric: []bool{false, false, false, false, true, true, true, true, false}}
	if fencing {
		t.header = append(t.header, "fencing")
		t.numeric = append(t.numeric, false)
	}
	for _, v := range ch.Verdicts {
		q := "no"
		if v.Qualifies {
			q = "yes"
		}
		if marked && (v.Backend == ch.Backend || slices.Contains(ch.Alike, v.Backend)) {
			q = "yes — recommended"
		}
		var nj []string
		for _, n := range v.NotJudged {
			cls, _, _ := strings.Cut(n, " — ")
			nj = append(nj, cls)
		}
		row := []string{v.Backend, q, v.Reason, orUnset(v.Standing, "—"), strconv.Itoa(v.Nodes), "—", "—", "—",
			orUnset(strings.Join(nj, ", "),
				"—")}
		if v.Throughput > 0 {
			row[5] = spreadRate(statsOf(v))
			row[6], row[7] = strconv.Itoa(v.Clients), fmtUS(float64(v.P99US))
		}
		if fencing {
			row = append(row, v.Fencing)
		}
		t.rows = append(t.rows, row)
	}
	return t
}
