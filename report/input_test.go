package report_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

func TestCompareFlagsRegressions(t *testing.T) {
	base := sample(t)
	head := edit(base, func(c *results.Case) {
		if c.Backend == "redlock" && c.Workload == "hot" && c.Fault == "none" && c.Clients == 16 && c.Guard == "none" {
			c.Throughput /= 2
		}
		if c.Backend == "sentinel" && c.Fault == "failover" && c.Guard == "none" {
			c.Overlaps += 5
		}
	})
	head = without(head, func(c *results.Case) bool { return c.Backend == "etcd" && c.Fault == "crash-minority" })
	dir := t.TempDir()
	cmp, err := report.Compare(dir, base, head)
	if err != nil {
		t.Fatal(err)
	}
	regs := map[string]string{}
	for _, r := range cmp.Regressions() {
		regs[r.Key] = strings.Join(r.Regressions, ", ")
	}
	if len(regs) != 2 || !strings.Contains(regs["redlock|hot|none|none|16|fast"], "throughput ×0.5") ||
		!strings.Contains(regs["sentinel|hot|failover|none|8|fast"], "overlaps 12→27") {
		t.Fatalf("regressions %v", regs)
	}
	md := string(read(t, filepath.Join(dir, "compare.md")))
	page := string(read(t, filepath.Join(dir, "compare.html")))
	checkSelfContained(t, page)
	for _, want := range []string{"2 regressions", "REGRESSION: throughput ×0.50", "not run in the new run"} {
		if !strings.Contains(md, want) || !strings.Contains(page, want) {
			t.Errorf("comparison lacks %q", want)
		}
	}

	same, err := report.Diff(base, base, report.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(same.Regressions()); n != 0 {
		t.Errorf("a run compared with itself has %d regressions", n)
	}
	if _, err := report.Diff(base, head, report.CompareOptions{ThroughputDrop: 1.5}); err == nil || !strings.Contains(err.Error(), "1.5") {
		t.Errorf("bad threshold: %v", err)
	}
}

func TestEmptyAndPartialRunsSayWhatIsMissing(t *testing.T) {
	for name, f := range map[string]*results.File{"nil": nil, "empty": {Version: results.Version}} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := report.Write(dir, f); err != nil {
				t.Fatal(err)
			}
			md := string(read(t, filepath.Join(dir, "report.md")))
			if !strings.Contains(md, "nothing was measured") || !strings.Contains(md, "cannot recommend a lock for efficiency") {
				t.Errorf("report.md of an empty run:\n%s", md)
			}
			checkSelfContained(t, string(read(t, filepath.Join(dir, "index.html"))))
			if rows := strings.Count(string(read(t, filepath.Join(dir, "results.csv"))), "\n"); rows != 1 {
				t.Errorf("results.csv of an empty run has %d lines", rows)
			}
		})
	}

	// An interrupted run: etcd never ran distinct keys, zookeeper no
	// faults, etcd got nothing at 64 clients on the hot key.
	partial := without(sample(t), func(c *results.Case) bool {
		return (c.Backend == "etcd" && c.Workload == "uniform") || (c.Backend == "zookeeper" && c.Fault != "none")
	})
	partial = edit(partial, func(c *results.Case) {
		if c.Backend == "etcd" && c.Clients == 64 && c.Fault == "none" {
			c.Throughput, c.Acquired, c.Timeline = 0, 0, make([]int64, len(c.Timeline))
			c.Histograms = results.Histograms{}
			c.LatencyUS = results.Percentiles{}
			c.Errors[results.ErrTimeout] = 640
		}
	})
	partial.Partial = true
	dir := t.TempDir()
	if err := report.Write(dir, partial); err != nil {
		t.Fatal(err)
	}
	for _, name := range allCharts {
		checkChart(t, dir, name)
	}
	md := string(read(t, filepath.Join(dir, "report.md")))
	for _, want := range []string{"PARTIAL", "etcd: not measured", "zookeeper: not run under server-pause", "etcd: no acquire succeeded at 64 clients", "The run is partial"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md of a partial run lacks %q", want)
		}
	}
}

func TestBadInputIsReportedNotFatal(t *testing.T) {
	f := &results.File{Version: results.Version, Cases: []results.Case{
		{Backend: "redis", Workload: "hot", Fault: "none", Guard: "none", Clients: 4, Throughput: math.NaN(), Acquired: 100, DurationS: 2,
			Histograms: results.Histograms{Acquire: "not a histogram"}, LatencyUS: results.Percentiles{P50: 10, P99: 50, P999: 90}},
		{Backend: "", Workload: "", Fault: "", Clients: -3, Throughput: math.Inf(1), Timeline: []int64{1, 2}, TimelineStepS: 0},
		{Backend: "etcd", Workload: "hot", Fault: "client-pause", Guard: "fence", Clients: 4, Timeline: []int64{5, 0, 5}, TimelineStepS: 1,
			FaultWindows: []results.Window{{Label: "backwards", StartS: 3, EndS: 1}}},
		{Backend: "etcd", Workload: "hot", Fault: "server-pause", Guard: "fence", Clients: 4, Injections: 10, Incidents: 0, IncidentRateUpper95: 0.5},
	}}
	dir := t.TempDir()
	if err := report.Write(dir, f); err != nil {
		t.Fatal(err)
	}
	md := string(read(t, filepath.Join(dir, "report.md")))
	for _, want := range []string{"histogram does not decode", "throughput NaN", "clients -3 is not positive", "timeline step 0 s", "not a valid span",
		"incident\\_rate\\_upper95 0.5000 in the file, 0.2589 from its 0 incidents in 10 tested injections"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md does not name the problem %q", want)
		}
	}
	if err := report.Write("", f); err == nil {
		t.Error("an empty output dir was accepted")
	}
	if err := (report.Options{LatencyClients: -1}).Write(dir, f); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Errorf("negative latency clients: %v", err)
	}
}

func TestRenderReadsResultsJSON(t *testing.T) {
	dir := t.TempDir()
	if err := results.Write(filepath.Join(dir, report.ResultsFile), twoLocks(t).f); err != nil {
		t.Fatal(err)
	}
	if err := report.Render(dir); err != nil {
		t.Fatal(err)
	}
	read(t, filepath.Join(dir, "index.html"))
	if err := report.Render(filepath.Join(dir, "nope")); err == nil {
		t.Error("rendering a dir without results.json succeeded")
	}
	if _, err := report.CompareFiles(dir, filepath.Join(dir, report.ResultsFile), filepath.Join(dir, report.ResultsFile)); err != nil {
		t.Fatal(err)
	}
}
