package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// charts holds the rendered charts by family, in document order.
type charts struct {
	throughput, latency, cdf, timeline []*chart
	safety                             *chart
	failed                             []string
}

// build assembles the report document from the data, its charts and the
// recommendation.
func (ds *dataset) build(cs *charts, rec *Recommendation, latencyClients int) *document {
	d := &document{title: "lockbench report"}
	ds.meta(d)
	ds.coverage(d, cs)

	d.h(2, "Summary per backend")
	workloads := ds.workloadsUnder(faultNone)
	if len(workloads) == 0 {
		d.p(`No fault-free (fault "none") cases were measured, so there is no throughput or latency summary.`)
	}
	for _, w := range workloads {
		guard := ds.primaryGuard(w, faultNone)
		clients := ds.latencyClients(w, guard, latencyClients)
		d.h(3, "Workload "+w)
		d.p(fmt.Sprintf("Fault none, guard %s. Throughput is the mean over trials in grants/s at each client count; acquire latency percentiles are at %d clients, from the merged histograms of all trials. Violations are overlaps + stale writes accepted + lost updates + token regressions, summed over every workload, guard and trial.", guard, clients))
		d.table(ds.summaryTable(w, guard, clients))
	}

	d.h(2, "Charts")
	if len(ds.Groups) == 0 {
		d.p("No charts: the results file has no cases.")
	}
	if len(cs.throughput) > 0 {
		d.h(3, "Throughput vs clients")
	}
	for _, c := range cs.throughput {
		d.figure(c)
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
	if cs.safety != nil {
		d.h(3, "Safety")
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

	ds.safetySection(d)
	recommendationSection(d, rec)
	d.h(2, "Files")
	d.p("results.json holds every case with its histograms; results.csv holds one row per case (every trial and host as recorded) with these columns, in this order:")
	d.list(CSVColumns())
	d.p("Each chart is in charts/ as PNG and SVG; this page inlines the PNGs.")
	return d
}

func (ds *dataset) meta(d *document) {
	f := ds.File
	d.h(2, "Run")
	var items []string
	when := "unknown"
	if !f.Started.IsZero() {
		when = f.Started.UTC().Format(time.RFC3339)
		if !f.Finished.IsZero() && f.Finished.After(f.Started) {
			when += fmt.Sprintf(" to %s (%s)", f.Finished.UTC().Format(time.RFC3339), f.Finished.Sub(f.Started).Round(time.Second))
		}
	}
	items = append(items, "When: "+when)
	items = append(items, "Machine: "+orUnset(f.Machine, "not recorded"))
	hosts := "not recorded"
	if len(f.Hosts) > 0 {
		hosts = strings.Join(f.Hosts, ", ")
	}
	items = append(items, "Load-generator hosts: "+hosts)
	if f.Command != "" {
		items = append(items, "Command: "+f.Command)
	}
	if f.Partial {
		items = append(items, "Partial: yes — the run was interrupted before every case ran; missing combinations show as \"not run\".")
	} else {
		items = append(items, "Partial: no")
	}
	maxTrials := 0
	for _, g := range ds.Groups {
		maxTrials = max(maxTrials, g.Trials)
	}
	var clients []string
	for _, c := range ds.Clients {
		clients = append(clients, strconv.Itoa(c))
	}
	items = append(items,
		fmt.Sprintf("Cases: %d (%d combinations, up to %s each)", len(f.Cases), len(ds.Groups), plural(int64(maxTrials), "trial")),
		"Backends: "+listOrNone(ds.Backends),
		"Workloads: "+listOrNone(ds.Workloads),
		"Faults: "+listOrNone(ds.Faults),
		"Guards: "+listOrNone(ds.Guards),
		"Client counts: "+listOrNone(clients),
	)
	d.list(items)
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// coverage shows which fault × backend combinations ran, with which
// guards, and every problem found in the input.
func (ds *dataset) coverage(d *document, cs *charts) {
	d.h(2, "What was measured")
	if len(ds.Groups) == 0 {
		d.strong("The results file has no cases: nothing was measured, so there is nothing to chart or recommend.")
	} else {
		d.p("Guards run for each fault (row) and backend (column); \"—\" marks a combination that was not run, and every conclusion below is limited to what ran.")
		t := table{header: append([]string{"fault"}, ds.Backends...)}
		for _, f := range ds.Faults {
			row := []string{f}
			for _, b := range ds.Backends {
				var guards []string
				for _, g := range ds.Guards {
					if len(ds.find(group{Backend: b, Fault: f, Guard: g})) > 0 {
						guards = append(guards, g)
					}
				}
				row = append(row, orUnset(strings.Join(guards, ", "), "—"))
			}
			t.rows = append(t.rows, row)
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

// summaryTable has a row per backend: throughput at each client count,
// acquire percentiles at one client count, and violations.
func (ds *dataset) summaryTable(workload, guard string, latClients int) table {
	var clients []int
	for _, g := range ds.find(group{Workload: workload, Fault: faultNone, Guard: guard}) {
		if g.Clients > 0 {
			clients = appendNew(clients, g.Clients)
		}
	}
	slices.Sort(clients)
	t := table{header: []string{"backend", "nodes"}}
	for _, c := range clients {
		t.header = append(t.header, fmt.Sprintf("grants/s @%d", c))
	}
	t.header = append(t.header, fmt.Sprintf("p50 @%d", latClients), fmt.Sprintf("p99 @%d", latClients), fmt.Sprintf("p99.9 @%d", latClients),
		"violations, no fault", "violations, faults")
	for i := range t.header {
		t.numeric = append(t.numeric, i > 0)
	}
	for _, b := range ds.Backends {
		row := []string{b, strconv.Itoa(ds.nodes(b))}
		for _, c := range clients {
			cell := "—"
			if gs := ds.find(group{Backend: b, Workload: workload, Fault: faultNone, Guard: guard, Clients: c}); len(gs) > 0 {
				cell = fmtRate(gs[0].Throughput)
			}
			row = append(row, cell)
		}
		if gs := ds.find(group{Backend: b, Workload: workload, Fault: faultNone, Guard: guard, Clients: latClients}); len(gs) > 0 && gs[0].Acquired > 0 {
			l := gs[0].Latency
			row = append(row, fmtUS(float64(l.P50)), fmtUS(float64(l.P99)), fmtUS(float64(l.P999)))
		} else {
			row = append(row, "—", "—", "—")
		}
		none := ds.find(group{Backend: b, Fault: faultNone})
		var faulted []*group
		for _, g := range ds.find(group{Backend: b}) {
			if g.Fault != faultNone {
				faulted = append(faulted, g)
			}
		}
		row = append(row, countOrDash(none), countOrDash(faulted))
		t.rows = append(t.rows, row)
	}
	return t
}

func countOrDash(gs []*group) string {
	if len(gs) == 0 {
		return "not run"
	}
	t := totals(gs)
	return strconv.FormatInt(t.violations(), 10)
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

// safetySection is the fault × backend × guard table with notes.
func (ds *dataset) safetySection(d *document) {
	d.h(2, "Safety table")
	if len(ds.Groups) == 0 {
		d.p("No cases, so no safety measurements.")
		return
	}
	d.p("Counts summed over workloads, client counts and trials. Overlaps: two holders of one key at once. Stale accepted/rejected: writes by a client whose lease had ended, which the resource let through or refused. Lost updates: lost increments of a read-modify-write counter. Token regressions: grants whose fencing token was not above an earlier grant's.")
	t := table{
		header:  []string{"fault", "backend", "guard", "tokens checked", "overlaps", "stale accepted", "stale rejected", "lost updates", "token regressions", "trials", "notes"},
		numeric: []bool{false, false, false, false, true, true, true, true, true, true, false},
	}
	for _, f := range ds.Faults {
		for _, b := range ds.Backends {
			for _, guard := range ds.Guards {
				gs := ds.find(group{Backend: b, Fault: f, Guard: guard})
				if len(gs) == 0 {
					continue
				}
				s := totals(gs)
				tokens := "no"
				switch {
				case s.Fencing && s.Unfenced:
					tokens = "some cases"
				case s.Fencing:
					tokens = "yes"
				}
				t.rows = append(t.rows, []string{f, b, guard, tokens, itoa(s.Overlaps), itoa(s.StaleAccepted), itoa(s.StaleRejected),
					itoa(s.LostUpdates), itoa(s.TokenRegressions), strconv.Itoa(s.Trials), brief(s.Notes)})
				t.flag = append(t.flag, s.violations() > 0)
			}
		}
	}
	d.table(t)
	d.p("Rows in bold (highlighted) counted at least one violation.")
}

func recommendationSection(d *document, rec *Recommendation) {
	d.h(2, "Recommendation")
	d.p("Derived from the numbers above by the rules at the end of this section; nothing here is written in advance.")
	d.h(3, "Locks for efficiency (a rare double grant is tolerable)")
	d.strong(rec.Efficiency.Answer)
	d.table(verdictTable(rec.Efficiency, false))
	d.h(3, "Locks for correctness (a double grant corrupts data)")
	d.strong(rec.Correctness.Answer)
	if len(rec.Correctness.Missing) > 0 {
		d.p("Missing to judge: " + joinAnd(rec.Correctness.Missing) + ".")
	}
	d.table(verdictTable(rec.Correctness, true))
	d.h(3, "Caveats the measurements exposed")
	if len(rec.Caveats) == 0 {
		d.p("None.")
	}
	d.list(rec.Caveats)
	d.h(3, "Rules")
	d.list(Rules)
}

func verdictTable(ch Choice, fencing bool) table {
	t := table{header: []string{"backend", "qualifies", "why", "nodes", "peak grants/s", "at clients", "p99 there"},
		numeric: []bool{false, false, false, true, true, true, true}}
	if fencing {
		t.header = append(t.header, "fencing")
		t.numeric = append(t.numeric, false)
	}
	for _, v := range ch.Verdicts {
		q := "no"
		if v.Qualifies {
			q = "yes"
		}
		if v.Backend == ch.Backend {
			q = "yes — recommended"
		}
		row := []string{v.Backend, q, v.Reason, strconv.Itoa(v.Nodes), "—", "—", "—"}
		if v.Throughput > 0 {
			row[4], row[5], row[6] = fmtRate(v.Throughput), strconv.Itoa(v.Clients), fmtUS(float64(v.P99US))
		}
		if fencing {
			row = append(row, v.Fencing)
		}
		t.rows = append(t.rows, row)
	}
	return t
}
