package report_test

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// The fixture and its report cost seconds to build (a minute under
// -race): each is built once, and the report's dir removed by TestMain.
var (
	fixtureOnce sync.Once
	fixtureFile *results.File

	renderOnce sync.Once
	renderDir  string
	renderErr  error
)

func sample(t *testing.T) *results.File {
	t.Helper()
	fixtureOnce.Do(func() { fixtureFile = newFixture(t).f })
	return fixtureFile
}

// rendered returns the dir of the fixture's report, written once with
// every chart; tests only read it.
func rendered(t *testing.T) string {
	t.Helper()
	f := sample(t)
	renderOnce.Do(func() {
		renderDir, renderErr = os.MkdirTemp("", "lockbench-report-test-")
		if renderErr == nil {
			renderErr = report.Write(renderDir, f)
		}
	})
	if renderErr != nil {
		t.Fatal(renderErr)
	}
	return renderDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if renderDir != "" {
		os.RemoveAll(renderDir)
	}
	os.Exit(code)
}

// allCharts are the charts of the fixture but its timelines, one per
// fault (timelineCharts).
var allCharts = []string{
	"throughput-hot", "throughput-uniform", "own-cost", "latency-hot", "latency-uniform", "cdf-hot", "cdf-uniform",
	"availability", "safety-efficiency", "safety-correctness", "safety", "timeline-failover", "timeline-restart", "timeline-crash-minority", "timeline-server-pause", "timeline-partition-leader",
}

// timelineCharts is the number of timeline charts of the fixture: one
// per fault name, params included.
const timelineCharts = 9

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatalf("%s is empty", path)
	}
	return b
}

// checkChart asserts a chart exists as a decodable PNG of sensible size
// and at most 256 colours, and as well-formed SVG.
func checkChart(t *testing.T, dir, name string) {
	t.Helper()
	checkPNG(t, dir, name)
	dec := xml.NewDecoder(bytes.NewReader(read(t, filepath.Join(dir, "charts", name+".svg"))))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s.svg is not XML: %v", name, err)
		}
	}
}

// checkPNG asserts charts/<name>.png is a paletted PNG (at most 256
// colours: a fraction of a true-colour file) of sensible size.
func checkPNG(t *testing.T, dir, name string) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(read(t, filepath.Join(dir, "charts", name+".png"))))
	if err != nil {
		t.Fatalf("%s.png: %v", name, err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 400 || b.Dx() > 4000 || b.Dy() > 4000 {
		t.Errorf("%s.png is %dx%d px", name, b.Dx(), b.Dy())
	}
	if p, ok := img.(*image.Paletted); !ok || len(p.Palette) > 256 {
		t.Errorf("%s.png is a %T, want a paletted image of at most 256 colours", name, img)
	}
}

// TestLinkedChartsWithoutSVG renders the fixture as make sample does
// (--link-charts --no-svg): index.html links each chart's PNG, which
// exists, inlines none, and neither page names an SVG.
func TestLinkedChartsWithoutSVG(t *testing.T) {
	dir := t.TempDir()
	if err := (report.Options{LinkCharts: true, NoSVG: true}).Write(dir, sample(t)); err != nil {
		t.Fatal(err)
	}
	page := string(read(t, filepath.Join(dir, "index.html")))
	md := string(read(t, filepath.Join(dir, "report.md")))
	if strings.Contains(page, "data:image") {
		t.Error("index.html inlines a chart under LinkCharts")
	}
	for _, name := range allCharts {
		if !strings.Contains(page, `src="charts/`+name+`.png"`) {
			t.Errorf("index.html does not link charts/%s.png", name)
		}
		checkPNG(t, dir, name)
	}
	if svgs, _ := filepath.Glob(filepath.Join(dir, "charts", "*.svg")); len(svgs) > 0 || strings.Contains(md, ".svg") {
		t.Errorf("NoSVG: %d SVG files written, report.md names an SVG: %v", len(svgs), strings.Contains(md, ".svg"))
	}
}

// checkSelfContained asserts index.html fetches nothing.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "<script", "<link", "@import", "url(", "src=\"charts/", "src=\"/"} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html contains %q: not self-contained", bad)
		}
	}
}

func TestWriteRendersEveryFile(t *testing.T) {
	f := sample(t)
	dir := rendered(t)
	for _, name := range allCharts {
		checkChart(t, dir, name)
	}
	page := string(read(t, filepath.Join(dir, "index.html")))
	md := string(read(t, filepath.Join(dir, "report.md")))
	checkSelfContained(t, page)
	timelines, err := filepath.Glob(filepath.Join(dir, "charts", "timeline-*.png"))
	if err != nil || len(timelines) != timelineCharts {
		t.Errorf("%d timeline charts (%v), want %d", len(timelines), err, timelineCharts)
	}
	if n, want := strings.Count(page, "data:image/png;base64,"), len(allCharts)-5+timelineCharts; n != want {
		t.Errorf("index.html inlines %d charts, want %d", n, want)
	}
	for _, name := range allCharts {
		if !strings.Contains(page, `id="chart-`+name+`"`) {
			t.Errorf("index.html lacks chart %s", name)
		}
		if !strings.Contains(md, "charts/"+name+".png") {
			t.Errorf("report.md lacks chart %s", name)
		}
	}
	for _, want := range []string{"The answer", "Recommendation in full", "Safety with bounds", "Availability under faults", "How to read it", "2 cores, linux/amd64", "bench-1", "complete",
		"Run id: r20260314-0930", "seed: 20260314", "suite: default", "2 cores, 24.0 GiB memory", "redis-server 7.0.15", "zookeeper 3.8.4",
		"fast = no fsync", "durable = every write synced", "Invalid cases", "SIGSTOP of zk-2 failed", "Rules", "noop (control)"} {
		if !strings.Contains(md, want) || !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(md, "replica promoted without the lock key") {
		t.Error("the safety table lacks the cases' notes")
	}

	rows, err := csv.NewReader(bytes.NewReader(read(t, filepath.Join(dir, "results.csv")))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(f.Cases)+1 {
		t.Fatalf("results.csv has %d rows, want a header and %d cases", len(rows), len(f.Cases))
	}
	cols := report.CSVColumns()
	for i, c := range cols {
		if name, _, _ := strings.Cut(c, ":"); rows[0][i] != name {
			t.Fatalf("column %d is %q, documented as %q", i, rows[0][i], name)
		}
	}
	if rows[1][0] != f.Cases[0].Key() {
		t.Errorf("first row key %q, want %q", rows[1][0], f.Cases[0].Key())
	}
}

func TestRecommendationFollowsTheData(t *testing.T) {
	base := sample(t)
	rec := report.Recommend(base)
	// Efficiency: redis and sentinel are fastest but serve next to nothing
	// while a server is paused (12 windows each: the test sets them
	// apart); etcd and ZooKeeper recover in over a second; Redlock and
	// redsync stay up, and Redlock's 3 faster trials are too few to call
	// it faster: they are recommended alike.
	// Correctness: Redlock double-grants under a majority clock jump, so
	// only etcd and ZooKeeper qualify; ZooKeeper's faster trials are too
	// few too, so they are recommended alike.
	if rec.Efficiency.Backend != "redlock" || !slices.Equal(rec.Efficiency.Alike, []string{"redsync"}) ||
		rec.Correctness.Backend != "etcd" || !slices.Equal(rec.Correctness.Alike, []string{"zookeeper"}) {
		t.Fatalf("recommended %q (alike %v) for efficiency and %q (alike %v) for correctness, want redlock with redsync and etcd with zookeeper:\n%s\n%s",
			rec.Efficiency.Backend, rec.Efficiency.Alike, rec.Correctness.Backend, rec.Correctness.Alike, rec.Efficiency.Answer, rec.Correctness.Answer)
	}
	for _, c := range []struct {
		ch      report.Choice
		backend string
		wants   []string
		ok      bool
	}{
		{rec.Correctness, "sentinel", []string{"lock bugs", "failover"}, false},
		{rec.Correctness, "redsync", []string{"lock bugs", "restart"}, false},
		{rec.Correctness, "redlock", []string{"lock bugs", "clock-jump (fast profile)"}, false},
		{rec.Correctness, "redis", []string{"restart (fast profile)"}, false},
		{rec.Correctness, "etcd", []string{"no lock-bug incident; injections with one, not judged tested: client-pause (fast) 0/24 ≤12%; crash-minority (fast) 0/12 ≤22%"}, true},
		{rec.Correctness, "redlock?quarantine=false", []string{"lock bugs", "restart"}, false},
		{rec.Efficiency, "noop", []string{"control"}, false},
		{rec.Efficiency, "redlock?quarantine=false", []string{"not judged: not run without faults"}, false},
		{rec.Efficiency, "redis", []string{"double-grant incidents without faults: 0 in"}, true},
	} {
		v := verdict(t, c.ch, c.backend)
		if v.Qualifies != c.ok {
			t.Errorf("%s qualifies = %v: %s", c.backend, v.Qualifies, v.Reason)
		}
		for _, w := range c.wants {
			if !strings.Contains(v.Reason, w) {
				t.Errorf("%s's reason %q lacks %q", c.backend, v.Reason, w)
			}
		}
	}
	if v := verdict(t, rec.Correctness, "zookeeper"); !strings.HasPrefix(v.Standing, "recommended alike with etcd") {
		t.Errorf("zookeeper's standing %q", v.Standing)
	}
	if v := verdict(t, rec.Efficiency, "redis"); !strings.HasPrefix(v.Standing, "set apart on availability: under server-pause") {
		t.Errorf("redis's standing %q", v.Standing)
	}
	if v := verdict(t, rec.Correctness, "zookeeper"); !strings.HasPrefix(v.Fencing, "required") {
		t.Errorf("zookeeper fencing: %q, want required (its holders outlived their lease under client-pause)", v.Fencing)
	}
	if !slices.Equal(rec.Correctness.Compared, []string{"client-pause", "crash-minority", "partition-leader", "server-pause"}) {
		t.Errorf("correctness compared on %v", rec.Correctness.Compared)
	}
	caveats := strings.Join(rec.Caveats, "\n")
	for _, want := range []string{
		"Every backend without fencing accepted stale writes under client-pause",
		"under failover (fast profile): 6 incidents; 6 in 12 injections had one (50%; ≤ 75% at 95%)",
		"zookeeper: expired-holder incidents under client-pause 12 incidents, 12 in 24 injections had one",
		"did not judge their injections",
		"token regression",
		"2 cases were excluded as invalid",
		"The bounds this run reaches",
	} {
		if !strings.Contains(caveats, want) {
			t.Errorf("caveats lack %q:\n%s", want, caveats)
		}
	}
	if len(rec.Invalid) != 2 || !strings.Contains(rec.Invalid[0], "zookeeper under server-pause") || !strings.Contains(rec.Invalid[1], "SIGSTOP of zk-2 failed") {
		t.Errorf("invalid cases %q", rec.Invalid)
	}

	// redis double-grants without faults: it no longer qualifies for
	// efficiency.
	redisOverlaps := edit(base, func(c *results.Case) {
		if c.Backend == "redis" && c.Fault == "none" && c.Clients == 16 && c.Workload == "hot" {
			c.Overlaps, c.Incidents, c.OverlapsLockBug, c.IncidentsLockBug = 2, 1, 2, 1
		}
	})
	r2 := report.Recommend(redisOverlaps)
	if v := verdict(t, r2.Efficiency, "redis"); v.Qualifies || !strings.Contains(v.Reason, "lock-bug incident") {
		t.Errorf("redis verdict: %+v", v)
	}

	// Every backend fails: no recommendation at all.
	allFail := edit(base, func(c *results.Case) {
		c.Overlaps++
		c.Incidents++
		c.IncidentsLockBug++
	})
	r4 := report.Recommend(allFail)
	if r4.Efficiency.Backend != "" || r4.Correctness.Backend != "" {
		t.Errorf("with every backend failing, recommended %q and %q", r4.Efficiency.Backend, r4.Correctness.Backend)
	}
	dir := t.TempDir()
	if err := (report.Options{NoCharts: true}).Write(dir, allFail); err != nil {
		t.Fatal(err)
	}
	md := string(read(t, filepath.Join(dir, "report.md")))
	if !strings.Contains(md, "No backend qualifies for efficiency locks") || !strings.Contains(md, "No backend qualifies for correctness locks") {
		t.Error("report.md does not say that no backend qualifies")
	}

	// Without client-pause the run cannot judge correctness, and says so.
	noPause := without(base, func(c *results.Case) bool { return c.FaultClass == "client-pause" })
	r5 := report.Recommend(noPause)
	if r5.Correctness.Judgeable || r5.Correctness.Backend != "" || !strings.Contains(r5.Correctness.Answer, "client-pause") {
		t.Errorf("without client-pause: %+v", r5.Correctness)
	}

	// Without fault-free cases nothing is judged on speed or efficiency.
	noNone := without(base, func(c *results.Case) bool { return c.Fault == "none" })
	if r := report.Recommend(noNone); r.Efficiency.Judgeable || r.Efficiency.Backend != "" {
		t.Errorf("without fault none: %+v", r.Efficiency)
	}
}

func TestSummaryTable(t *testing.T) {
	var b strings.Builder
	if err := report.Summary(&b, sample(t), 16); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"workload hot", "workload uniform", "grants/s @64", "p99 @16", "own cost @1", "redlock", "zookeeper", "seed 20260314",
		"Efficiency locks: Use redlock or redsync", "Correctness locks: Use etcd or zookeeper", "Lock-bug incidents, per fault class and profile (injections with one, not judged tested): client-pause (fast) 0/24 ≤12%", "2 invalid cases excluded"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// TestSample renders the fixture, and its partial variant, into
// $LOCKBENCH_REPORT_SAMPLE to look at: the charts are checked by eye.
func TestSample(t *testing.T) {
	dir := os.Getenv("LOCKBENCH_REPORT_SAMPLE")
	if dir == "" {
		t.Skip("set LOCKBENCH_REPORT_SAMPLE to a directory to render the sample report")
	}
	if err := report.Write(dir, sample(t)); err != nil {
		t.Fatal(err)
	}
	partial := without(sample(t), func(c *results.Case) bool {
		return (c.Backend == "etcd" && c.Workload == "uniform") || (c.Backend == "zookeeper" && c.Fault != "none")
	})
	partial = edit(partial, func(c *results.Case) {
		if c.Backend == "etcd" && c.Clients == 64 && c.Fault == "none" {
			c.Throughput, c.Acquired, c.Timeline = 0, 0, make([]int64, len(c.Timeline))
			c.Histograms, c.LatencyUS = results.Histograms{}, results.Percentiles{}
		}
	})
	partial.Partial = true
	if err := report.Write(filepath.Join(dir, "partial"), partial); err != nil {
		t.Fatal(err)
	}
	if _, err := report.Compare(filepath.Join(dir, "compare"), sample(t), partial); err != nil {
		t.Fatal(err)
	}
	if err := report.Write(filepath.Join(dir, "many"), manyBackends(t)); err != nil {
		t.Fatal(err)
	}
}

// manyBackends is the fixture's fault-free and client-pause cases with
// every backend doubled under a long name: sixteen backends must still
// give readable charts.
func manyBackends(t *testing.T) *results.File {
	f := sample(t)
	g := *f
	g.Cases = nil
	for _, c := range f.Cases {
		if c.Fault == "none" || c.FaultClass == "client-pause" {
			g.Cases = append(g.Cases, c)
			c.Backend += "-with-a-long-variant-name"
			g.Cases = append(g.Cases, c)
		}
	}
	return &g
}

func TestManyBackendsRender(t *testing.T) {
	dir := t.TempDir()
	if err := report.Write(dir, manyBackends(t)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"latency-hot", "safety", "throughput-uniform", "own-cost", "availability"} {
		checkChart(t, dir, name)
	}
}
