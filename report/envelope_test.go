package report_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// writeEnvelopes writes f's envelope report into a temporary dir and
// returns the dir and its envelope.md.
func writeEnvelopes(t *testing.T, f *results.File) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := report.WriteEnvelopes(dir, f, nil); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "envelope.md"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, md
}

// TestEnvelopesDrawTheProfilesRegion: an envelope file with a profile
// gets a chart per family and a section whose margins cite the profile's
// pause and clock step against each boundary.
func TestEnvelopesDrawTheProfilesRegion(t *testing.T) {
	res := math.Pow(2, 0.25)
	pause := results.Envelope{Backend: "redis", Family: "client-pause", Fault: "client-pause", Param: "x", Unit: "lease", LeaseMS: 1000,
		MinSize: 0.0625, MaxSize: 3, Resolution: res,
		Points: []results.EnvelopePoint{
			{Size: 0.8409, Tested: 6, Injections: 6, LateWrites: map[string]int{"none": 0}},
			{Size: 1, Tested: 3, Injections: 3, LateWrites: map[string]int{"none": 3}},
			{Size: 3, Tested: 6, Injections: 6, LateWrites: map[string]int{"none": 6}},
		},
		Boundaries: []results.Boundary{
			{Event: results.EventLockBug, Safe: 3, SafeTested: 6, SafeUpper95: 0.39, None: true},
			{Event: "late-write:none", Safe: 0.8409, SafeTested: 6, SafeUpper95: 0.39, First: 1, FirstCount: 3, FirstTested: 3, Resolved: true},
		}}
	jump := pause
	jump.Family, jump.Unit, jump.Boundaries = "clock-jump", "key lifetime", []results.Boundary{
		{Event: results.EventLockBug, Safe: 0.2102, SafeTested: 6, SafeUpper95: 0.39, First: 0.25, FirstCount: 2, FirstTested: 6, Resolved: true}}
	p := &results.Profile{TTL: results.Duration(10 * time.Second), MaxPause: results.Duration(800 * time.Millisecond),
		ClockStep: results.Duration(2 * time.Second)}
	f := &results.File{Envelopes: []results.Envelope{pause, jump}, Profile: p}
	dir, md := writeEnvelopes(t, f)
	for _, want := range []string{"reach 0.08 leases", "was at 1 leases (12.5× your pauses)", "never reached up to 3 leases",
		"reach 0.2 key lifetimes", "was at 0.25 key lifetimes (1.2× your clock steps)", "charts/envelope-clock-jump.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("envelope.md lacks %q:\n%s", want, md)
		}
	}
	for _, c := range []string{"envelope-client-pause.png", "envelope-clock-jump.svg"} {
		if _, err := os.Stat(filepath.Join(dir, "charts", c)); err != nil {
			t.Error(err)
		}
	}
}

// TestEnvelopeSaysWhereTestingStops: a family whose largest sizes tested
// nothing (a failover that outlasts the sections it could break) says
// where that begins, in the terminal, in the report's table, and as a
// dashed line on its chart.
func TestEnvelopeSaysWhereTestingStops(t *testing.T) {
	e := results.Envelope{Backend: "sentinel", Family: "failover", Fault: "failover", Param: "x", Unit: "lease", LeaseMS: 10000,
		MinSize: 0.0625, MaxSize: 2, Resolution: math.Pow(2, 0.25),
		Points: []results.EnvelopePoint{
			{Size: 0.0625, Tested: 1, Injections: 1, LockBugs: 1},
			{Size: 0.7071, Tested: 1, Injections: 1, LockBugs: 1},
			{Size: 0.8409, Tested: 0, Injections: 2},
			{Size: 2, Tested: 0, Injections: 2},
		},
		Boundaries: []results.Boundary{{Event: results.EventLockBug, First: 0.0625, FirstCount: 1, FirstTested: 1, Resolved: true}},
		Edge:       &results.TestedEdge{Last: 0.7071, LastTested: 1, Untested: 0.8409},
	}
	f := &results.File{Envelopes: []results.Envelope{e}}
	var term strings.Builder
	if err := report.EnvelopeText(&term, f); err != nil {
		t.Fatal(err)
	}
	dir, md := writeEnvelopes(t, f)
	const want = "tested up to 0.7071 leases (1 tested injections there); from 0.8409 on none did"
	for what, got := range map[string]string{"terminal": term.String(), "envelope.md": string(md)} {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, got)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "envelope-failover.png")); err != nil {
		t.Error(err)
	}
}
