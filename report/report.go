// Package report renders a lockbench run — a results.File — into a
// directory a person can read: results.csv, charts (PNG and SVG, drawn
// with gonum/plot), report.md and a self-contained index.html. The
// report opens with the answer — a lock for efficiency and one for
// correctness, each with its evidence — derived from the numbers by
// stated Rules that a rival backend's author could check: safety
// numbers always carry their 95% bounds, speeds their spread over
// trials, backends are compared only on the fault classes they all
// faced, and invalid cases are excluded and listed. It also compares two
// runs (Compare) and prints a short summary for the terminal (Summary).
//
// Layout of a report dir:
//
//	results.csv            one row per case, columns as CSVColumns
//	report.md, index.html  the report; index.html inlines every chart
//	charts/*.png, *.svg    throughput-<workload>, own-cost,
//	                       latency-<workload>, cdf-<workload>,
//	                       availability, safety, timeline-<fault>
//	compare.md, .html      written by Compare
//
// Nothing here panics on bad input: an empty, partial or inconsistent
// results file yields a report that says what is missing.
package report

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/lockbench/lockbench/results"
)

// ResultsFile is the name of the results file in a run directory, the
// one Render reads.
const ResultsFile = "results.json"

// Options tune a report. The zero value is the default.
type Options struct {
	// LatencyClients is the client count the latency charts and summary
	// percentiles use; 0 (or a count not measured) picks the count at
	// which the most backends ran, the larger on a tie.
	LatencyClients int
	// NoCharts leaves the charts out: the CSV, the tables and the
	// recommendation only, in a fraction of the time drawing takes.
	NoCharts bool
	// LinkCharts makes index.html link its charts (charts/<name>.png
	// beside it) instead of inlining them: a page a tenth of the size,
	// which then needs its charts dir (docs/sample keeps it).
	LinkCharts bool
	// NoSVG leaves the SVG files out: the PNGs only (make sample).
	NoSVG bool
}

// Write renders the report of f into dir with the default Options.
func Write(dir string, f *results.File) error { return Options{}.Write(dir, f) }

// Write renders the report of f into dir (created if needed): CSV,
// charts, report.md and index.html. It renders everything it can; a
// chart that fails is named in the report and in the returned error, and
// the other files are still written.
func (o Options) Write(dir string, f *results.File) error {
	if strings.TrimSpace(dir) == "" {
		return fmt.Errorf("report: empty output directory")
	}
	if o.LatencyClients < 0 {
		return fmt.Errorf("report: latency clients %d is negative", o.LatencyClients)
	}
	if err := os.MkdirAll(filepath.Join(dir, chartDir), 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	ds := analyse(f)
	cs, chartErr := &charts{}, error(nil)
	if !o.NoCharts {
		cs, chartErr = ds.renderCharts(dir, o)
	}
	rec := ds.recommend()
	doc := ds.build(cs, rec, o)

	var errs []error
	if chartErr != nil {
		errs = append(errs, chartErr)
	}
	var csvBuf, md, page bytes.Buffer
	for _, out := range []struct {
		name  string
		buf   *bytes.Buffer
		write func() error
	}{
		{"results.csv", &csvBuf, func() error { return WriteCSV(&csvBuf, ds.File) }},
		{"report.md", &md, func() error { return writeMarkdown(&md, doc) }},
		{"index.html", &page, func() error { return writeHTML(&page, doc, o.LinkCharts) }},
	} {
		if err := out.write(); err != nil {
			errs = append(errs, fmt.Errorf("report: %s: %w", out.name, err))
			continue
		}
		if err := writeFile(filepath.Join(dir, out.name), out.buf.Bytes()); err != nil {
			errs = append(errs, err)
		}
	}
	if f != nil && len(f.Envelopes) > 0 && !o.NoCharts { // lockbench envelope's, or advise --envelopes: envelope.md beside
		if err := WriteEnvelopes(dir, f, f.Profile); err != nil {
			errs = append(errs, fmt.Errorf("report: envelopes: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Render re-renders the report of the run in dir from dir/results.json
// (what `lockbench report DIR` does).
func Render(dir string) error {
	f, err := results.Read(filepath.Join(dir, ResultsFile))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return Write(dir, f)
}

// renderCharts draws every chart the data supports and writes its files
// into dir as o says. A chart without data is skipped (the document says
// so); a chart that fails is recorded.
func (ds *dataset) renderCharts(dir string, o Options) (*charts, error) {
	latencyClients := o.LatencyClients
	// Each chart is drawn on its own, so they are drawn at once, a core
	// each: drawing is most of a report's time (on make bench's 328
	// cases, 23 s of 28 on a loaded 2-core machine), and make bench
	// renders the report inside its 15 minutes. The order of the
	// document stays the order below.
	type slot struct {
		draw func() (*chart, error)
		into func(*chart)
		c    *chart
		err  error
	}
	cs := &charts{}
	var slots []*slot
	add := func(draw func() (*chart, error), into func(*chart)) {
		slots = append(slots, &slot{draw: draw, into: into})
	}
	for _, w := range ds.workloadsUnder(faultNone) {
		add(func() (*chart, error) { return ds.throughputChart(w) }, func(c *chart) { cs.throughput = append(cs.throughput, c) })
		add(func() (*chart, error) { return ds.latencyChart(w, latencyClients) }, func(c *chart) { cs.latency = append(cs.latency, c) })
		add(func() (*chart, error) { return ds.cdfChart(w, latencyClients) }, func(c *chart) { cs.cdf = append(cs.cdf, c) })
	}
	add(func() (*chart, error) { return ds.costChart() }, func(c *chart) { cs.cost = c })
	add(func() (*chart, error) { return ds.availabilityChart() }, func(c *chart) { cs.availability = c })
	for _, intent := range []string{intentEfficiency, intentCorrectness} {
		add(func() (*chart, error) { return ds.intentSafetyChart(intent) }, func(c *chart) { cs.safetyIntent = append(cs.safetyIntent, c) })
	}
	add(func() (*chart, error) { return ds.safetyChart() }, func(c *chart) { cs.safety = c })
	for _, f := range ds.Faults {
		if f != faultNone {
			add(func() (*chart, error) { return ds.timelineChart(f) }, func(c *chart) { cs.timeline = append(cs.timeline, c) })
		}
	}
	work := make(chan *slot)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(slots)) {
		wg.Go(func() {
			for s := range work {
				s.c, s.err = s.draw()
				if s.err == nil && s.c != nil {
					s.err = s.c.write(dir, !o.NoSVG)
				}
			}
		})
	}
	for _, s := range slots {
		work <- s
	}
	close(work)
	wg.Wait()
	var errs []error
	for _, s := range slots {
		switch {
		case s.err != nil:
			errs = append(errs, s.err)
			cs.failed = append(cs.failed, s.err.Error())
		case s.c != nil:
			s.into(s.c)
		}
	}
	return cs, errors.Join(errs...)
}

// writeFile writes data to path through a temporary file renamed into
// place, so a reader never sees half a report.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("report: %s: %w", path, err)
	}
	return nil
}

// fileSafe turns a workload or fault name into a file-name part.
func fileSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if strings.Trim(out, ".") == "" {
		out = "unnamed"
	}
	if out != s { // keep distinct names distinct: "a b" and "a_b"
		h := fnv.New32a()
		h.Write([]byte(s))
		out += fmt.Sprintf("-%08x", h.Sum32())
	}
	return out
}
