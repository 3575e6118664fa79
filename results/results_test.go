package results_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/results"
)

func caseWith(t *testing.T, host string, latencies []int64) results.Case {
	t.Helper()
	h := results.NewHistogram()
	for _, v := range latencies {
		if err := h.RecordValue(v); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := results.Encode(h)
	if err != nil {
		t.Fatal(err)
	}
	return results.Case{
		Backend: "redlock", Workload: "hot", Fault: "none", Guard: "none", Clients: 4, Host: host,
		Acquired: int64(len(latencies)), DurationS: 2, Overlaps: 1,
		Errors: map[string]int64{results.ErrNode: 1}, Timeline: []int64{int64(len(latencies))},
		LatencyUS: results.Summarise(h), Histograms: results.Histograms{Acquire: enc},
	}
}

// TestMergeAddsHostsWithoutLoss merges files without a run id (from before
// the judge, each host counting its own resource): everything adds up.
func TestMergeAddsHostsWithoutLoss(t *testing.T) {
	var a, b, all []int64
	for i := int64(1); i <= 1000; i++ {
		a = append(a, i)          // host a: 1..1000 µs
		b = append(b, 100000+i*7) // host b: much slower
	}
	all = append(append(all, a...), b...)
	fa := &results.File{Hosts: []string{"a"}, Cases: []results.Case{caseWith(t, "a", a)}}
	fb := &results.File{Hosts: []string{"b"}, Cases: []results.Case{caseWith(t, "b", b)}}
	m, err := results.Merge(fa, fb)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) != 1 || !reflect.DeepEqual(m.Hosts, []string{"a", "b"}) {
		t.Fatalf("merged into %d cases from hosts %v", len(m.Cases), m.Hosts)
	}
	c := m.Cases[0]
	want := caseWith(t, "", all)
	if c.LatencyUS != want.LatencyUS {
		t.Fatalf("merged percentiles %+v, want those of all operations %+v", c.LatencyUS, want.LatencyUS)
	}
	if c.Acquired != 2000 || c.Throughput != 1000 || c.Overlaps != 2 || c.Errors[results.ErrNode] != 2 || c.Timeline[0] != 2000 {
		t.Fatalf("merged counts wrong: %+v", c)
	}
	if c.Host != "a+b" {
		t.Fatalf("merged host %q", c.Host)
	}
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	f := &results.File{Started: time.Unix(1, 0).UTC(), Cases: []results.Case{caseWith(t, "h", []int64{5, 6})}}
	if err := results.Write(path, f); err != nil {
		t.Fatal(err)
	}
	g, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, g) {
		t.Fatalf("read back %+v, wrote %+v", g, f)
	}
}

func TestKeySeparatesDurabilityProfiles(t *testing.T) {
	c := results.Case{Backend: "redis", Workload: "hot", Fault: "restart", Guard: "fence", Clients: 8}
	legacy := c.Key()
	if legacy != "redis|hot|restart|fence|8" {
		t.Fatalf("key without a profile %q changed", legacy)
	}
	fast, durable := c, c
	fast.Durability, durable.Durability = results.DurabilityFast, results.DurabilityDurable
	if fast.Key() == durable.Key() || fast.Key() == legacy {
		t.Fatalf("keys %q and %q do not tell the profiles apart", fast.Key(), durable.Key())
	}
}

// jointCase is caseWith carrying the judge's joint safety counts, the
// same on every host of a run.
func jointCase(t *testing.T, host string, latencies []int64) results.Case {
	c := caseWith(t, host, latencies)
	c.Fault, c.FaultClass, c.Injections = "client-pause?x=1.5", "client-pause", 8
	c.Overlaps, c.OverlapsExpiredHolder, c.Incidents, c.IncidentsExpiredHolder = 5, 5, 2, 2
	c.StaleAccepted, c.StaleRejected, c.LostUpdates = 1, 3, 1
	c.Linearizable, c.LinearizableFenced = results.NotLinearizable, results.Linearizable
	c.Targets = []results.Target{{Injection: 1, Nodes: []string{"worker-3"}}}
	c.Availability = &results.Availability{BaselineThroughput: 100, InFaultThroughput: 40, InFaultP99US: 900, RecoveryS: []float64{0.5, 1}}
	return c
}

func TestMergeTakesJointSafetyCountsOnce(t *testing.T) {
	a := jointCase(t, "a", []int64{10, 20, 30})
	b := jointCase(t, "b", []int64{40, 50})
	b.Availability = &results.Availability{BaselineThroughput: 50, InFaultThroughput: 10, InFaultP99US: 2000, RecoveryS: []float64{0.7, -1}}
	fa := &results.File{RunID: "run-7", Seed: 42, Hosts: []string{"a"}, Versions: map[string]string{"lockbench": "v1"}, Cases: []results.Case{a}}
	fb := &results.File{RunID: "run-7", Seed: 42, Hosts: []string{"b"}, Versions: map[string]string{"redis-server": "7.0.15"}, Cases: []results.Case{b}}
	m, err := results.Merge(fa, fb)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) != 1 {
		t.Fatalf("%d cases", len(m.Cases))
	}
	c := m.Cases[0]
	// Measured per host: summed.
	if c.Acquired != 5 || c.Timeline[0] != 5 || c.Errors[results.ErrNode] != 2 {
		t.Errorf("per-host measurements not summed: acquired %d, timeline %v, errors %v", c.Acquired, c.Timeline, c.Errors)
	}
	// Counted by the judge: once.
	if c.Overlaps != 5 || c.Incidents != 2 || c.IncidentsExpiredHolder != 2 || c.StaleAccepted != 1 || c.StaleRejected != 3 || c.LostUpdates != 1 || c.Injections != 8 {
		t.Errorf("joint counts summed across hosts: %+v", c)
	}
	if c.Linearizable != results.NotLinearizable || c.LinearizableFenced != results.Linearizable || len(c.Targets) != 1 {
		t.Errorf("verdicts or targets changed: %v %v %v", c.Linearizable, c.LinearizableFenced, c.Targets)
	}
	if av := c.Availability; av == nil || av.BaselineThroughput != 150 || av.InFaultThroughput != 50 || av.InFaultP99US != 2000 || av.RecoveryS[0] != 0.7 || av.RecoveryS[1] != -1 {
		t.Errorf("availability %+v", c.Availability)
	}
	if len(c.Notes) != 0 {
		t.Errorf("agreeing hosts got notes %q", c.Notes)
	}
	if m.RunID != "run-7" || m.Seed != 42 || m.Versions["lockbench"] != "v1" || m.Versions["redis-server"] != "7.0.15" {
		t.Errorf("run facts lost: run %q seed %d versions %v", m.RunID, m.Seed, m.Versions)
	}

	// Hosts that disagree: the larger count is kept, and said.
	b.Incidents, b.IncidentsExpiredHolder = 3, 3
	fb.Cases = []results.Case{b}
	m, err = results.Merge(fa, fb)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Cases[0]; c.Incidents != 3 || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "incidents 2 vs 3") {
		t.Errorf("disagreeing hosts: incidents %d, notes %q", c.Incidents, c.Notes)
	}

	// Files of two runs do not merge.
	for _, other := range []*results.File{{RunID: "run-8", Seed: 42}, {RunID: "run-7", Seed: 43}} {
		if _, err := results.Merge(fa, other); err == nil {
			t.Errorf("merged run %q seed %d into run-7 seed 42", other.RunID, other.Seed)
		}
	}
}
