package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/results"
)

// TestReportMerge merges two hosts' results of one run with report
// --merge: what each host measured adds up, the judge's joint safety
// counts are taken once, and the merged report renders. Files of two
// runs are refused.
func TestReportMerge(t *testing.T) {
	dir := t.TempDir()
	host := func(name string, acquired int64) string {
		c := results.Case{Backend: "redis", Workload: "hot", Fault: "client-pause?x=3", FaultClass: "client-pause", Guard: "fence", Fencing: true,
			Clients: 2, Trial: 1, Host: name, Acquired: acquired, DurationS: 1, Throughput: float64(acquired), Injections: 4,
			Overlaps: 3, OverlapsExpiredHolder: 3, Incidents: 1, IncidentsExpiredHolder: 1, StaleRejected: 2,
			Durability: results.DurabilityFast, ClientsAs: results.ClientsProcesses}
		f := &results.File{RunID: "run-1", Seed: 5, Hosts: []string{name}, Cases: []results.Case{c}}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := results.Write(filepath.Join(p, "results.json"), f); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := host("a", 100), host("b", 50)
	out := filepath.Join(dir, "merged")
	if _, stderr, err := lockbench(t, "report", "--merge", a, b, "--out", out); err != nil {
		t.Fatalf("report --merge: %v\n%s", err, stderr)
	}
	m, err := results.Read(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) != 1 {
		t.Fatalf("%d merged cases", len(m.Cases))
	}
	c := m.Cases[0]
	if c.Acquired != 150 || c.Overlaps != 3 || c.Incidents != 1 || c.StaleRejected != 2 || c.Injections != 4 || c.Host != "a+b" {
		t.Errorf("merged case: acquired %d, overlaps %d, incidents %d, stale rejected %d, injections %d, host %q; want 150, 3, 1, 2, 4, a+b",
			c.Acquired, c.Overlaps, c.Incidents, c.StaleRejected, c.Injections, c.Host)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "Run id: run-1") {
		t.Errorf("merged report: %v", err)
	}

	other := host("c", 10)
	f, err := results.Read(filepath.Join(other, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	f.RunID = "run-2"
	if err := results.Write(filepath.Join(other, "results.json"), f); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lockbench(t, "report", "--merge", a, other, "--out", filepath.Join(dir, "bad")); err == nil || !strings.Contains(err.Error(), "run-2") {
		t.Errorf("merging two runs: %v", err)
	}
}
