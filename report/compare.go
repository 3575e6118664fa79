package report

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/results"
)

// CompareOptions set what counts as a regression between two runs.
type CompareOptions struct {
	// ThroughputDrop flags a case whose median throughput fell by more
	// than this fraction of the baseline's; 0 means 0.10.
	ThroughputDrop float64
	// P99Rise flags a case whose acquire p99 rose by more than this
	// fraction of the baseline's; 0 means 0.25 (tails are noisy).
	P99Rise float64
}

func (o CompareOptions) withDefaults() (CompareOptions, error) {
	if o.ThroughputDrop == 0 {
		o.ThroughputDrop = 0.10
	}
	if o.P99Rise == 0 {
		o.P99Rise = 0.25
	}
	if !(o.ThroughputDrop > 0 && o.ThroughputDrop < 1) {
		return o, fmt.Errorf("compare: throughput drop %v is not a fraction in (0, 1)", o.ThroughputDrop)
	}
	if !(o.P99Rise > 0) || math.IsInf(o.P99Rise, 0) {
		return o, fmt.Errorf("compare: p99 rise %v is not a positive fraction", o.P99Rise)
	}
	return o, nil
}

// Counts are the safety counts of a case, summed over its trials.
// LockBugs are the lock-bug incidents (with the ones nobody classified),
// Expired the expired-holder incidents.
type Counts struct {
	Overlaps, StaleAccepted, StaleRejected, LostUpdates, TokenRegressions int64
	LockBugs, Expired                                                     int64
}

// CompareRow compares one case key (results.Case.Key) across two runs,
// each side aggregated over its trials as in the report.
type CompareRow struct {
	Key                             string
	Backend, Workload, Fault, Guard string
	Clients                         int
	InBase, InHead                  bool
	BaseThroughput, HeadThroughput  float64
	// ThroughputRatio is head/base; NaN when the baseline had none or
	// either run lacks the case.
	ThroughputRatio  float64
	BaseP99, HeadP99 int64
	// P99Ratio is head/base acquire p99; NaN when either side has no
	// latency (no acquire) or lacks the case.
	P99Ratio   float64
	Base, Head Counts
	// Regressions name what got worse ("throughput ×0.71", "overlaps
	// 0→3"); Improvements what got better.
	Regressions, Improvements []string
}

// Comparison is a baseline run against a new run.
type Comparison struct {
	Options    CompareOptions
	Base, Head *results.File
	Rows       []CompareRow
	// Recommendation changes, when the two runs recommend differently.
	Changes []string
}

// Regressions returns the rows that got worse.
func (c *Comparison) Regressions() []CompareRow {
	var out []CompareRow
	for _, r := range c.Rows {
		if len(r.Regressions) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// Diff compares head against base case by case. Throughput and p99 are
// flagged past the Options' thresholds; any increase in overlaps,
// lock-bug incidents, stale writes accepted, lost updates or token
// regressions is a regression (stale writes rejected are the guard
// working, so they are not). Invalid cases take no part.
func Diff(base, head *results.File, o CompareOptions) (*Comparison, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	bd, hd := analyse(base), analyse(head)
	c := &Comparison{Options: o, Base: bd.File, Head: hd.File}
	rows := map[string]*CompareRow{}
	var keys []string
	add := func(g *group, isBase bool) {
		r, ok := rows[g.Key]
		if !ok {
			r = &CompareRow{Key: g.Key, Backend: g.Backend, Workload: g.Workload, Fault: g.Fault, Guard: g.Guard, Clients: g.Clients}
			rows[g.Key] = r
			keys = append(keys, g.Key)
		}
		counts := Counts{Overlaps: g.Overlaps, StaleAccepted: g.StaleAccepted, StaleRejected: g.StaleRejected, LostUpdates: g.LostUpdates,
			TokenRegressions: g.TokenRegressions, LockBugs: g.lockBugs(), Expired: g.IncidentsExpired}
		if isBase {
			r.InBase, r.BaseThroughput, r.BaseP99, r.Base = true, g.Throughput, g.Latency.P99, counts
		} else {
			r.InHead, r.HeadThroughput, r.HeadP99, r.Head = true, g.Throughput, g.Latency.P99, counts
		}
	}
	for _, g := range bd.Groups {
		add(g, true)
	}
	for _, g := range hd.Groups {
		add(g, false)
	}
	for _, k := range keys {
		r := rows[k]
		r.ThroughputRatio, r.P99Ratio = math.NaN(), math.NaN()
		if r.InBase && r.InHead {
			r.ThroughputRatio = ratio(r.HeadThroughput, r.BaseThroughput)
			if r.HeadP99 > 0 { // no acquire in the new run is no latency, not a fast one
				r.P99Ratio = ratio(float64(r.HeadP99), float64(r.BaseP99))
			}
			r.judge(o)
		}
		c.Rows = append(c.Rows, *r)
	}
	slices.SortStableFunc(c.Rows, func(a, b CompareRow) int {
		return cmp.Or(cmp.Compare(rowRank(a), rowRank(b)), cmp.Compare(a.Backend, b.Backend), cmp.Compare(a.Workload, b.Workload),
			compareFaults(a.Fault, b.Fault), compareGuards(a.Guard, b.Guard), cmp.Compare(a.Clients, b.Clients))
	})
	br, hr := bd.recommend(), hd.recommend()
	for _, q := range []struct {
		what string
		b, h Choice
	}{{"efficiency", br.Efficiency, hr.Efficiency}, {"correctness", br.Correctness, hr.Correctness}} {
		if q.b.Backend != q.h.Backend {
			c.Changes = append(c.Changes, fmt.Sprintf("The %s recommendation changed from %s to "+
				"%s.", q.what, orUnset(q.b.Backend, "none"), orUnset(q.h.Backend, "none")))
		}
	}
	return c, nil
}

// rowRank orders regressions first, then cases missing from either run.
func rowRank(r CompareRow) int {
	switch {
	case len(r.Regressions) > 0:
		return 0
	case !r.InHead || !r.InBase:
		return 1
	}
	return 2
}

func ratio(head, base float64) float64 {
	if base <= 0 {
		return math.NaN()
	}
	return head / base
}

func (r *CompareRow) judge(o CompareOptions) {
	if !math.IsNaN(r.ThroughputRatio) {
		switch {
		case r.ThroughputRatio < 1-o.ThroughputDrop:
			r.Regressions = append(r.Regressions, "throughput "+fmtRatio(r.ThroughputRatio))
		case r.ThroughputRatio > 1+o.ThroughputDrop:
			r.Improvements = append(r.Improvements, "throughput "+fmtRatio(r.ThroughputRatio))
		}
	} else if r.HeadThroughput > 0 {
		r.Improvements = append(r.Improvements, "throughput from 0")
	}
	if !math.IsNaN(r.P99Ratio) {
		switch {
		case r.P99Ratio > 1+o.P99Rise:
			r.Regressions = append(r.Regressions, "p99 "+fmtRatio(r.P99Ratio))
		case r.P99Ratio < 1/(1+o.P99Rise):
			r.Improvements = append(r.Improvements, "p99 "+fmtRatio(r.P99Ratio))
		}
	}
	for _, v := range []struct {
		what       string
		base, head int64
	}{
		{"overlaps", r.Base.Overlaps, r.Head.Overlaps},
		{"lock-bug incidents", r.Base.LockBugs, r.Head.LockBugs},
		{"stale accepted", r.Base.StaleAccepted, r.Head.StaleAccepted},
		{"lost updates", r.Base.LostUpdates, r.Head.LostUpdates},
		{"token regressions", r.Base.TokenRegressions, r.Head.TokenRegressions},
	} {
		change := fmt.Sprintf("%s %d→%d", v.what, v.base, v.head)
		switch {
		case v.head > v.base:
			r.Regressions = append(r.Regressions, change)
		case v.head < v.base:
			r.Improvements = append(r.Improvements, change)
		}
	}
}

// Compare writes compare.md and compare.html into dir comparing head (the
// new run) against base, with the default CompareOptions.
func Compare(dir string, base, head *results.File) (*Comparison, error) {
	return CompareOptions{}.Compare(dir, base, head)
}

// Compare writes compare.md and compare.html into dir (created if
// needed) and returns the comparison, so a caller can fail a build on
// its Regressions.
func (o CompareOptions) Compare(dir string, base, head *results.File) (*Comparison, error) {
	if strings.TrimSpace(dir) == "" {
		return nil, fmt.Errorf("compare: empty output directory")
	}
	c, err := Diff(base, head, o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	doc := c.document()
	var md, page bytes.Buffer
	if err := errors.Join(writeMarkdown(&md, doc), writeHTML(&page, doc, false)); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	if err := errors.Join(writeFile(filepath.Join(dir, "compare.md"), md.Bytes()), writeFile(filepath.Join(dir, "compare.html"),
		page.Bytes())); err != nil {
		return nil, err
	}
	return c, nil
}

// CompareFiles reads two results files and writes their comparison into
// dir (what `lockbench report --compare A B` does).
func CompareFiles(dir, basePath, headPath string) (*Comparison, error) {
	base, err := results.Read(basePath)
	if err != nil {
		return nil, fmt.Errorf("compare: baseline: %w", err)
	}
	head, err := results.Read(headPath)
	if err != nil {
		return nil, fmt.Errorf("compare: new run: %w", err)
	}
	return Compare(dir, base, head)
}

func runLine(f *results.File) string {
	s := "started " + orUnset(formatTime(f.Started), "unknown") + ", machine " + orUnset(f.Machine, "not recorded")
	if len(f.Hosts) > 0 {
		s += ", hosts " + strings.Join(f.Hosts, ", ")
	}
	s += fmt.Sprintf(", %d cases", len(f.Cases))
	if f.Partial {
		s += ", PARTIAL"
	}
	return s
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func (c *Comparison) document() *document {
	d := &document{title: "lockbench comparison", blocks: []block{contents{}}}
	d.h(2, "Runs")
	d.list([]string{"Baseline: " + runLine(c.Base), "New run: " + runLine(c.Head)})
	var onlyBase, onlyHead int
	for _, r := range c.Rows {
		if !r.InHead {
			onlyBase++
		}
		if !r.InBase {
			onlyHead++
		}
	}
	regs := len(c.Regressions())
	verdict := fmt.Sprintf("%s in %d cases compared.", plural(int64(regs), "regression"), len(c.Rows)-onlyBase-onlyHead)
	if regs == 0 {
		verdict = fmt.Sprintf("No regression in %d cases compared.", len(c.Rows)-onlyBase-onlyHead)
	}
	if onlyBase > 0 {
		verdict += fmt.Sprintf(" %d baseline cases were not run in the new run (their results are unknown, not fine).", onlyBase)
	}
	if onlyHead > 0 {
		verdict += fmt.Sprintf(" %d cases are new.", onlyHead)
	}
	d.strong(verdict)
	d.list(c.Changes)
	d.p(fmt.Sprintf("A case regresses when its median throughput fell by more than %.0f%%, its acquire p99 rose by more than %.0f%%, or any "+
		"of overlaps, lock-bug incidents, stale writes accepted, lost updates or token regressions increased. Ratios are new/baseline; trials "+
		"are aggregated as in the report (median throughput over trials, merged histograms, summed counts); invalid cases are left out.",
		c.Options.ThroughputDrop*100, c.Options.P99Rise*100))
	t := table{
		header: []string{"backend", "workload", "fault", "guard", "clients", "grants/s base → new", "ratio", "p99 base → " +
			"new", "ratio", "violations base → new", "verdict"},
		numeric: []bool{false, false, false, false, true, true, true, true, true, true, false},
	}
	for _, r := range c.Rows {
		verdict := "unchanged"
		switch {
		case !r.InHead:
			verdict = "not run in the new run"
		case !r.InBase:
			verdict = "new case"
		case len(r.Regressions) > 0:
			verdict = "REGRESSION: " + strings.Join(r.Regressions, ", ")
			if len(r.Improvements) > 0 {
				verdict += "; better: " + strings.Join(r.Improvements, ", ")
			}
		case len(r.Improvements) > 0:
			verdict = "better: " + strings.Join(r.Improvements, ", ")
		}
		side := func(in bool, s string) string {
			if !in {
				return "—"
			}
			return s
		}
		viol := func(x Counts) int64 { return x.LockBugs + x.StaleAccepted + x.LostUpdates + x.TokenRegressions }
		t.rows = append(t.rows, []string{r.Backend, r.Workload, r.Fault, r.Guard, strconv.Itoa(r.Clients),
			side(r.InBase, fmtRate(r.BaseThroughput)) + " → " + side(r.InHead, fmtRate(r.HeadThroughput)), fmtRatio(r.ThroughputRatio),
			side(r.InBase, fmtUS(float64(r.BaseP99))) + " → " + side(r.InHead, fmtUS(float64(r.HeadP99))), fmtRatio(r.P99Ratio),
			side(r.InBase, itoa(viol(r.Base))) + " → " + side(r.InHead, itoa(viol(r.Head))), verdict})
		t.flag = append(t.flag, len(r.Regressions) > 0)
	}
	d.h(2, "Cases")
	if len(t.rows) == 0 {
		d.p("Neither run has any case.")
	} else {
		d.table(t)
	}
	return d
}
