package report

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/results"
)

// TestAggregateTrialsAndHosts pins the aggregation the report documents:
// hosts of one trial add up, trials average, counts sum, histograms merge.
func TestAggregateTrialsAndHosts(t *testing.T) {
	hist := func(vs ...int64) string {
		h := results.NewHistogram()
		for _, v := range vs {
			if err := h.RecordValue(v); err != nil {
				t.Fatal(err)
			}
		}
		s, err := results.Encode(h)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := results.Case{Backend: "redlock", Workload: "hot", Fault: "none", Guard: "none", Clients: 4, TimelineStepS: 1}
	mk := func(trial int, host string, tp float64, timeline []int64, overlaps int64, h string) results.Case {
		c := base
		c.Trial, c.Host, c.Throughput, c.Timeline, c.Overlaps = trial, host, tp, timeline, overlaps
		c.Histograms.Acquire = h
		return c
	}
	ds := analyse(&results.File{Cases: []results.Case{
		mk(1, "a", 100, []int64{10, 20}, 1, hist(10, 20)),
		mk(1, "b", 50, []int64{5, 5}, 0, hist(30)),
		mk(2, "a", 300, []int64{40}, 2, hist(1000)),
	}})
	if len(ds.Groups) != 1 {
		t.Fatalf("%d groups", len(ds.Groups))
	}
	g := ds.Groups[0]
	if g.Trials != 2 || g.Throughput != 225 || g.ThroughputMin != 150 || g.ThroughputMax != 300 {
		t.Errorf("trials %d, throughput %v (%v–%v), want 2 trials, mean of 150 and 300", g.Trials, g.Throughput, g.ThroughputMin, g.ThroughputMax)
	}
	if g.Overlaps != 3 {
		t.Errorf("overlaps %d, want the sum 3", g.Overlaps)
	}
	if len(g.Timeline) != 2 || g.Timeline[0] != 27.5 || g.Timeline[1] != 25 {
		t.Errorf("timeline %v, want [(15+40)/2, 25]", g.Timeline)
	}
	if !g.LatencyPooled || g.Latency.Max < 1000 || g.hist.TotalCount() != 4 {
		t.Errorf("latency %+v pooled %v", g.Latency, g.LatencyPooled)
	}
	if math.IsNaN(g.Throughput) {
		t.Error("NaN throughput")
	}
}

// TestSeriesKeepApart checks what the charts promise a reader: thirteen
// locks and the control each get a colour of their own, the control's
// grey is nobody else's, and the control's throughput sets no scale for
// the real locks.
func TestSeriesKeepApart(t *testing.T) {
	names := []string{"etcd", "postgres?mode=advisory", "postgres?mode=lease", "redis", "redlock", "redlock?clockfloor=false",
		"redlock?quarantine=false", "redsync", "rueidislock", "sentinel", "sentinel?wait=1", "zookeeper", "zookeeper-3.9", "noop"}
	f := &results.File{}
	for i, b := range names {
		tp := 1000 + 100*float64(i)
		nodes := 3
		if b == "noop" {
			tp, nodes = 200000, 0
		}
		f.Cases = append(f.Cases, results.Case{Backend: b, Workload: "hot", Fault: "none", Guard: "none", Clients: 16, Trial: 1,
			Throughput: tp, Acquired: int64(tp), DurationS: 1, Nodes: nodes, Durability: map[bool]string{true: "", false: "fast"}[nodes == 0], Control: b == "noop"})
	}
	ds := analyse(f)
	seen := map[string]string{}
	for _, b := range ds.Backends {
		c := fmt.Sprint(ds.backendStyle(b).line.Color)
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s share the colour %s", b, other, c)
		}
		seen[c] = b
	}
	if ds.Backends[len(ds.Backends)-1] != "noop" || fmt.Sprint(ds.backendStyle("noop").line.Color) != fmt.Sprint(controlColor) {
		t.Errorf("the control is not last in grey: %v", ds.Backends)
	}
	tp := ds.throughputPlots("hot")
	if tp == nil || tp.below == nil {
		t.Fatal("no control panel")
	}
	if tp.main.Y.Max >= 200000 || tp.main.Y.Max < 2300 {
		t.Errorf("the real locks' axis runs to %v: the control (200k) set it, or it cuts the locks off (≤ 2.3k)", tp.main.Y.Max)
	}
	if tp.below.Y.Max < 200000 {
		t.Errorf("the control's own axis ends at %v, below its 200k", tp.below.Y.Max)
	}
}

func TestFormats(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{fmtRate3(1215), "1.22k"}, {fmtRate3(12345), "12.3k"}, {fmtRate3(885), "885"}, {fmtRate3(999.7), "1k"}, {fmtRate3(2_345_678), "2.35M"},
		{fmtPct(0.527), "53%"}, {fmtPct(0.0722), "7.2%"}, {fmtPct(0.0099), "0.99%"}, {fmtPct(0.0000241), "0.0024%"}, {fmtPct(0), "0%"},
		{perInjection(0, tally{Injections: 40}).String(), "0 in 40 tested injections (rate ≤ 7.2% at 95%)"},
		{perInjection(3, tally{Injections: 40}).String(), "3 in 40 tested injections (7.5%; ≤ 18% at 95%)"},
		{perInjection(3, tally{Injections: 40}).hadOne(), "3 in 40 tested injections had one (7.5%; ≤ 18% at 95%)"},
		{perInjection(0, tally{Injections: 40, Unjudged: true}).String(), "0 in 40 injections (rate ≤ 7.2% at 95%)"},
		{perInjection(0, tally{}).String(), "0, in no tested injection: not judged"},
		{perGrant(2, 300).hadOne(), "2 in 300 contended grants (0.67%; ≤ 2.1% at 95%)"},
		{perGrant(0, 300).cell(), "0/300 ≤0.99%"},
		{plural(2, "class"), "2 classes"}, {plural(3, "history"), "3 histories"}, {plural(1, "trial"), "1 trial"}, {plural(2, "key"), "2 keys"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestThroughputChartComparesLikeWithLike: goroutine clients at 1 and 16
// and the fault suite's six worker processes at 6 are two ways of
// measuring; one line may not join them.
func TestThroughputChartComparesLikeWithLike(t *testing.T) {
	f := &results.File{}
	for _, b := range []string{"etcd", "redis"} {
		for _, x := range []struct {
			clients int
			as      string
			tp      float64
		}{{1, results.ClientsGoroutines, 500}, {16, results.ClientsGoroutines, 2000}, {6, results.ClientsProcesses, 300}} {
			f.Cases = append(f.Cases, results.Case{Backend: b, Workload: "hot", Fault: "none", Guard: "none", Clients: x.clients, ClientsAs: x.as, Trial: 1,
				Throughput: x.tp, Acquired: int64(x.tp), DurationS: 1, Nodes: 3, Durability: "fast"})
		}
	}
	tp := analyse(f).throughputPlots("hot")
	if tp == nil {
		t.Fatal("no chart")
	}
	if want := ", clients as goroutines"; !strings.HasSuffix(tp.ch.Title, want) {
		t.Errorf("title %q does not say how the clients ran", tp.ch.Title)
	}
	var ticks []string
	for _, tk := range tp.main.X.Tick.Marker.Ticks(tp.main.X.Min, tp.main.X.Max) {
		ticks = append(ticks, tk.Label)
	}
	if strings.Join(ticks, ",") != "1,16" {
		t.Errorf("client counts on the axis %v, want 1 and 16 only", ticks)
	}
	notes := strings.Join(tp.ch.Notes, " ")
	if !strings.Contains(notes, "etcd at 6 clients (processes)") || !strings.Contains(notes, "redis at 6 clients (processes)") {
		t.Errorf("the process cases at 6 are not set apart: %q", notes)
	}
}
