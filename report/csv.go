package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/lockbench/lockbench/results"
)

// csvColumn is one column of results.csv: its name, what it holds, and
// how to read it from a case.
type csvColumn struct {
	name, doc string
	value     func(*results.Case) string
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func percentileColumns(prefix, what string, get func(*results.Case) results.Percentiles) []csvColumn {
	return []csvColumn{
		{prefix + "_p50", what + " median, µs", func(c *results.Case) string { return itoa(get(c).P50) }},
		{prefix + "_p90", what + " 90th percentile, µs", func(c *results.Case) string { return itoa(get(c).P90) }},
		{prefix + "_p99", what + " 99th percentile, µs", func(c *results.Case) string { return itoa(get(c).P99) }},
		{prefix + "_p999", what + " 99.9th percentile, µs", func(c *results.Case) string { return itoa(get(c).P999) }},
		{prefix + "_max", what + " maximum, µs", func(c *results.Case) string { return itoa(get(c).Max) }},
		{prefix + "_mean", what + " mean, µs", func(c *results.Case) string { return fmtFloat(get(c).Mean) }},
	}
}

// knownErrors are the error kinds with a column of their own; any other
// kind goes to errors_extra.
var knownErrors = []string{results.ErrNotAcquired, results.ErrNode, results.ErrLost, results.ErrTimeout, results.ErrOther}

func csvColumns() []csvColumn {
	cols := []csvColumn{
		{"key", "results.Case.Key() with empty names filled in: backend|workload|fault|guard|clients[|durability][|load], equal for trials of " +
			"one combination", func(c *results.Case) string {
			n := normalised(*c)
			return n.Key()
		}},
		{"backend", "lock backend", func(c *results.Case) string { return c.Backend }},
		{"workload", "load generator (key choice)", func(c *results.Case) string { return c.Workload }},
		{"load", "how holders held beyond a drawn time: validity (a fraction of what their lease had left), auto-extend (their lease extended " +
			"itself), or empty", func(c *results.Case) string { return c.Load }},
		{"fault", "injected fault scenario, with its params", func(c *results.Case) string { return c.Fault }},
		{"fault_class", "the fault's catalogue name without params (from the name when not " +
			"recorded)", func(c *results.Case) string { return classOf(c) }},
		{"guard", "resource guard mode: none, fence or cas (empty in the file: derived from " +
			"fencing)", func(c *results.Case) string { return guardOf(c) }},
		{"fencing", "whether the resource checked fencing tokens", func(c *results.Case) string { return strconv.FormatBool(c.Fencing) }},
		{"clients", "concurrent clients (per host)", func(c *results.Case) string { return strconv.Itoa(c.Clients) }},
		{"trial", "trial number of the combination", func(c *results.Case) string { return strconv.Itoa(c.Trial) }},
		{"host", "load generator host(s)", func(c *results.Case) string { return c.Host }},
		{"clients_as", "how the clients ran: processes or goroutines", func(c *results.Case) string { return c.ClientsAs }},
		{"durability", "the servers' durability profile: fast or durable", func(c *results.Case) string { return c.Durability }},
		{"seed", "the case's seed, derived from the run's", func(c *results.Case) string { return strconv.FormatUint(c.Seed, 10) }},
		{"invalid", "whether the fault failed to inject (the case is excluded from every " +
			"conclusion)", func(c *results.Case) string { return strconv.FormatBool(c.Invalid) }},
		{"invalid_reason", "why the case is invalid", func(c *results.Case) string { return c.InvalidReason }},
		{"keys", "number of lock keys", func(c *results.Case) string { return strconv.Itoa(c.Keys) }},
		{"ttl_ms", "lease TTL, ms", func(c *results.Case) string { return itoa(c.TTLMillis) }},
		{"duration_s", "how long the load ran, s", func(c *results.Case) string { return fmtFloat(c.DurationS) }},
		{"target_rate", "grants/s asked by an open loop; 0 for a closed loop", func(c *results.Case) string { return fmtFloat(c.TargetRate) }},
		{"nodes", "backend nodes", func(c *results.Case) string { return strconv.Itoa(c.Nodes) }},
		{"quorum", "nodes a grant needs", func(c *results.Case) string { return strconv.Itoa(c.Quorum) }},
		{"guarantee", "what the backend's guarantee rests on", func(c *results.Case) string { return c.Guarantee }},
		{"acquired", "grants", func(c *results.Case) string { return itoa(c.Acquired) }},
		{"throughput", "grants per second", func(c *results.Case) string { return fmtFloat(c.Throughput) }},
	}
	cols = append(cols, percentileColumns("latency_us", "acquire wait", func(c *results.Case) results.Percentiles { return c.LatencyUS })...)
	cols = append(cols, percentileColumns("hold_us", "hold time", func(c *results.Case) results.Percentiles { return c.HoldUS })...)
	cols = append(cols, percentileColumns("release_us", "release", func(c *results.Case) results.Percentiles { return c.ReleaseUS })...)
	for _, kind := range knownErrors {
		cols = append(cols, csvColumn{"errors_" + kind, "errors of kind " + kind, func(c *results.Case) string { return itoa(c.Errors[kind]) }})
	}
	cols = append(cols,
		csvColumn{"errors_extra", "errors of any other kind, as kind=count;… sorted by kind", extraErrors},
		csvColumn{"overlaps", "two critical sections of one key at once", func(c *results.Case) string { return itoa(c.Overlaps) }},
		csvColumn{"stale_accepted", "writes with a stale lease the resource " +
			"accepted", func(c *results.Case) string { return itoa(c.StaleAccepted) }},
		csvColumn{"stale_rejected", "writes with a stale lease the resource " +
			"rejected", func(c *results.Case) string { return itoa(c.StaleRejected) }},
		csvColumn{"lost_updates", "lost increments of the read-modify-write " +
			"counter", func(c *results.Case) string { return itoa(c.LostUpdates) }},
		csvColumn{"token_regressions", "grants whose token was not above an earlier " +
			"grant's", func(c *results.Case) string { return itoa(c.TokenRegressions) }},
		csvColumn{"overlaps_lock_bug", "overlaps granted before the previous grant's contract " +
			"line", func(c *results.Case) string { return itoa(c.OverlapsLockBug) }},
		csvColumn{"overlaps_expired_holder", "overlaps after the previous holder's lease had " +
			"ended", func(c *results.Case) string { return itoa(c.OverlapsExpiredHolder) }},
		csvColumn{"overlaps_ambiguous", "overlaps within the clock bounds of the previous grant's contract " +
			"line", func(c *results.Case) string { return itoa(c.OverlapsAmbiguous) }},
		csvColumn{"incidents", "distinct episodes of two holders", func(c *results.Case) string { return itoa(c.Incidents) }},
		csvColumn{"incidents_lock_bug", "incidents with a lock-bug overlap", func(c *results.Case) string { return itoa(c.IncidentsLockBug) }},
		csvColumn{"incidents_expired_holder", "incidents of expired holders " +
			"only", func(c *results.Case) string { return itoa(c.IncidentsExpiredHolder) }},
		csvColumn{"incidents_ambiguous", "incidents with an ambiguous overlap and no lock-bug " +
			"one", func(c *results.Case) string { return itoa(c.IncidentsAmbiguous) }},
		csvColumn{"contended_grants", "grants made while another client of the key " +
			"waited", func(c *results.Case) string { return itoa(c.ContendedGrants) }},
		csvColumn{"promise_ms", "the contract: ms after the call of Acquire nobody else may get the " +
			"key", func(c *results.Case) string { return fmtFloat(c.PromiseMS) }},
		csvColumn{"validity_short", "grants and extensions whose lease reported less validity than its " +
			"contract", func(c *results.Case) string { return itoa(c.ValidityShort) }},
		csvColumn{"validity_long", "grants and extensions whose lease reported more validity than its lock can " +
			"give", func(c *results.Case) string { return itoa(c.ValidityLong) }},
		csvColumn{"extends", "extensions of the leases reported (their auto-extend " +
			"watchdog's)", func(c *results.Case) string { return itoa(c.Extends) }},
		csvColumn{"extends_failed", "extensions the lock refused, or whose outcome is " +
			"unknown", func(c *results.Case) string { return itoa(c.ExtendsFailed) }},
		csvColumn{"injections", "times the fault was injected", func(c *results.Case) string { return strconv.Itoa(c.Injections) }},
		csvColumn{"injections_tested", "injections that tested what their class tests; empty when not judged", func(c *results.Case) string {
			if c.InjectionsTested == nil {
				return ""
			}
			return strconv.Itoa(*c.InjectionsTested)
		}},
		csvColumn{"incident_rate_upper95", "one-sided 95% upper bound on the tested injections followed by an " +
			"incident", func(c *results.Case) string { return fmtFloat(c.IncidentRateUpper95) }},
		csvColumn{"targets", "what each injection hit: n:node+node[leader][priority][untested];…", func(c *results.Case) string {
			var parts []string
			for _, t := range c.Targets {
				s := fmt.Sprintf("%d:%s", t.Injection, strings.Join(t.Nodes, "+"))
				if t.Leader {
					s += "[leader]"
				}
				if t.Priority {
					s += "[priority]"
				}
				if !t.Counted() {
					s += "[untested]"
				}
				parts = append(parts, s)
			}
			return strings.Join(parts, ";")
		}},
		csvColumn{"linearizable", "porcupine against a mutex model: true, false, unknown or " +
			"empty", func(c *results.Case) string { return verdictCell(c.Linearizable) }},
		csvColumn{"linearizable_fenced", "porcupine against a fenced-mutex " +
			"model", func(c *results.Case) string { return verdictCell(c.LinearizableFenced) }},
		csvColumn{"history", "the operation history, relative to the run dir", func(c *results.Case) string { return c.History }},
		csvColumn{"baseline_throughput", "grants/s before the first fault window", func(c *results.Case) string {
			return availCell(c, func(a *results.Availability) string { return fmtFloat(a.BaselineThroughput) })
		}},
		csvColumn{"in_fault_throughput", "grants/s inside the fault windows", func(c *results.Case) string {
			return availCell(c, func(a *results.Availability) string { return fmtFloat(a.InFaultThroughput) })
		}},
		csvColumn{"in_fault_p99_us", "acquire p99 of operations begun in a window, µs", func(c *results.Case) string {
			return availCell(c, func(a *results.Availability) string { return itoa(a.InFaultP99US) })
		}},
		csvColumn{"recovery_s", "seconds to recover after each window, ;-separated (-1: never)", func(c *results.Case) string {
			return availCell(c, func(a *results.Availability) string {
				var parts []string
				for _, r := range a.RecoveryS {
					parts = append(parts, fmtFloat(r))
				}
				return strings.Join(parts, ";")
			})
		}},
		csvColumn{"timeline_step_s", "timeline step, s", func(c *results.Case) string { return fmtFloat(c.TimelineStepS) }},
		csvColumn{"timeline_steps", "number of timeline steps", func(c *results.Case) string { return strconv.Itoa(len(c.Timeline)) }},
		csvColumn{"timeline_grants", "sum of the timeline's grants", func(c *results.Case) string {
			var n int64
			for _, v := range c.Timeline {
				n += v
			}
			return itoa(n)
		}},
		csvColumn{"fault_windows", "fault windows as label@start-end seconds;…", func(c *results.Case) string {
			var parts []string
			for _, w := range c.FaultWindows {
				parts = append(parts, fmt.Sprintf("%s@%s-%s", w.Label, fmtFloat(w.StartS), fmtFloat(w.EndS)))
			}
			return strings.Join(parts, ";")
		}},
		csvColumn{"notes", "the case's notes joined with \" | \"", func(c *results.Case) string { return strings.Join(c.Notes, " | ") }},
	)
	return cols
}

// verdictCell is a verdict for the CSV: empty when not checked.
func verdictCell(v results.Verdict) string { return string(v) }

// availCell is an availability field, empty without availability.
func availCell(c *results.Case, get func(*results.Availability) string) string {
	if c.Availability == nil {
		return ""
	}
	return get(c.Availability)
}

func extraErrors(c *results.Case) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.Errors)) {
		if !slices.Contains(knownErrors, k) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, c.Errors[k]))
		}
	}
	return strings.Join(parts, ";")
}

// CSVColumns returns the columns of results.csv in their fixed order,
// each as "name: meaning", so that scripts and the report document the
// same layout. The order never depends on the data: error kinds beyond
// the known ones share the errors_extra column.
func CSVColumns() []string {
	var out []string
	for _, c := range csvColumns() {
		out = append(out, c.name+": "+c.doc)
	}
	return out
}

// WriteCSV writes one row per case of f (every trial and host as
// recorded, not aggregated) under a header of the CSVColumns names.
// Histograms and the per-step timeline stay in results.json; the CSV
// holds their summaries. A nil or empty file yields the header alone.
func WriteCSV(w io.Writer, f *results.File) error {
	cols := csvColumns()
	cw := csv.NewWriter(w)
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.name
	}
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("csv header: %w", err)
	}
	if f != nil {
		row := make([]string, len(cols))
		for i := range f.Cases {
			c := &f.Cases[i]
			for j, col := range cols {
				row[j] = col.value(c)
			}
			if err := cw.Write(row); err != nil {
				return fmt.Errorf("csv row %d (%s): %w", i, c.Key(), err)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}
