package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/lockbench/lockbench/results"
)

// Summary prints the run's headline numbers as plain-text tables — per
// workload without faults, one row per backend: throughput at each
// client count and acquire p50/p99, medians with their ranges over
// trials, the lock's own cost, fault-free incidents with their bound —
// followed by the caveats, and by the two recommendations of the
// report's older rules only when the run holds no decided answer
// (results.File.Answer), which the caller prints (AnswerText). `make bench` prints it at the end of
// a run; latencyClients is as Options.LatencyClients.
func Summary(w io.Writer, f *results.File, latencyClients int) error {
	ds := analyse(f)
	rec := ds.recommend()
	var b strings.Builder
	title := "lockbench summary"
	if !ds.File.Started.IsZero() {
		title += " — " + ds.File.Started.UTC().Format("2006-01-02 15:04 MST")
	}
	if ds.File.Machine != "" {
		title += " — " + ds.File.Machine
	}
	if ds.File.Partial {
		title += " — PARTIAL RUN"
	}
	fmt.Fprintln(&b, title)
	if f := ds.File; f.RunID != "" || f.Seed != 0 || f.Suite != "" {
		fmt.Fprintf(&b, "run %s, seed %d, suite %s; durability: "+
			"%s\n", orUnset(f.RunID, "?"), f.Seed, orUnset(f.Suite, "by flags"), strings.Join(ds.Durabilities, ", "))
	}
	if len(ds.Groups) == 0 {
		fmt.Fprintln(&b, "\nNo cases: nothing was measured.")
	}
	for _, wl := range ds.workloadsUnder(faultNone) {
		guard := ds.primaryGuard(wl, faultNone)
		clients := ds.latencyClients(wl, guard, latencyClients)
		profile, _ := ds.profileUnder(wl, faultNone)
		fmt.Fprintf(&b, "\nworkload %s, fault none, guard %s, %s profile (grants/s by clients, median and range over trials; latency at %d "+
			"clients)\n", wl, guard, profile, clients)
		writeText(&b, ds.summaryTable(wl, guard, profile, clients))
	}
	for _, q := range []struct {
		what string
		ch   Choice
	}{{"Efficiency locks", rec.Efficiency}, {"Correctness locks", rec.Correctness}} {
		if f.Answer != nil {
			// The decided answer (AnswerText) is the one answer: the
			// report's older rules would print a second, and they differ.
			break
		}
		fmt.Fprintf(&b, "\n%s: %s\n", q.what, q.ch.Answer)
		for _, e := range q.ch.Evidence {
			fmt.Fprintf(&b, "  * %s\n", e)
		}
	}
	if n := len(rec.Invalid); n > 0 {
		fmt.Fprintf(&b, "%s excluded (see the report).\n", plural(int64(n), "invalid case"))
	}
	const shown = 8
	if len(rec.Caveats) > 0 {
		fmt.Fprintln(&b, "Caveats:")
		for i, c := range rec.Caveats {
			if i == shown {
				fmt.Fprintf(&b, "  ... and %d more in the report\n", len(rec.Caveats)-shown)
				break
			}
			fmt.Fprintf(&b, "  - %s\n", c)
		}
	}
	if len(ds.Problems) > 0 {
		fmt.Fprintf(&b, "%s in the input; see the report.\n", plural(int64(len(ds.Problems)), "problem"))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}

// writeText lays a table out in columns: text left, numbers right.
func writeText(b *strings.Builder, t table) {
	width := make([]int, len(t.header))
	for _, row := range append([][]string{t.header}, t.rows...) {
		for i := range width {
			if i < len(row) {
				width[i] = max(width[i], utf8.RuneCountInString(row[i]))
			}
		}
	}
	for _, row := range append([][]string{t.header}, t.rows...) {
		for i := range width {
			cell := ""
			if i < len(row) {
				cell = row[i]
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			if i < len(t.numeric) && t.numeric[i] {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
			if i < len(width)-1 {
				b.WriteString("  ")
			}
		}
		b.WriteString("\n")
	}
}
