package results_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/results"
)

func goodEnvelope() results.Envelope {
	return results.Envelope{Backend: "redis", Family: "clock-jump", Fault: "clock-jump?nodes=majority", Param: "by", Unit: "key lifetime",
		LeaseMS: 2000, MinSize: 0.0625, MaxSize: 2, Resolution: math.Pow(2, 0.25),
		Points: []results.EnvelopePoint{
			{Size: 0.21, Tested: 6, Injections: 6, LateWrites: map[string]int{"none": 0}, Seeds: []uint64{1}},
			{Size: 0.25, Tested: 3, Injections: 3, LockBugs: 2, LateWrites: map[string]int{"none": 2}, Seeds: []uint64{2}},
		},
		Boundaries: []results.Boundary{{Event: results.EventLockBug, Safe: 0.21, SafeTested: 6, SafeUpper95: 0.39,
			First: 0.25, FirstCount: 2, FirstTested: 3, Resolved: true}},
		Edge: &results.TestedEdge{Last: 1.19, LastTested: 3, Untested: 1.41},
	}
}

// TestEnvelopeCheckNamesEachBadValue: a file whose envelope contradicts
// itself is refused by Read, with every bad value named.
func TestEnvelopeCheckNamesEachBadValue(t *testing.T) {
	if err := goodEnvelope().Check(); err != nil {
		t.Fatal(err)
	}
	e := goodEnvelope()
	e.MinSize, e.Resolution = -1, 1
	e.Points[1].LockBugs = 9
	e.Points[0].LateWrites["none"] = -1
	e.Boundaries[0].SafeUpper95 = math.NaN()
	e.Edge.Untested = 1
	err := e.Check()
	for _, want := range []string{"sizes -1", "resolution 1", "9 lock bugs in 3", "-1 late writes under none", "bound NaN",
		"tested edge: 3 tested at 1.19, none from 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %v: want it to name %q", err, want)
		}
	}
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{"version": results.Version, "envelopes": []results.Envelope{e}})
	path := filepath.Join(dir, "results.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := results.Read(path); err == nil {
		t.Fatal("Read accepted a bad envelope")
	}
}

// FuzzReadEnvelopes: an envelope run's results.json is read back by
// lockbench report and advise --envelopes from a dir anyone may hand
// them. Read never panics; what it accepts passes Check, describes its
// boundaries, and writes back.
func FuzzReadEnvelopes(f *testing.F) {
	good, err := json.Marshal(map[string]any{"version": results.Version, "envelopes": []results.Envelope{goodEnvelope()}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{string(good), `{"version":1,"envelopes":[{}]}`,
		`{"version":1,"envelopes":[{"min_size":1,"max_size":1,"resolution":2,"points":[{"size":1,"tested":-1}]}]}`,
		`{"version":1,"envelopes":[{"boundaries":[{"safe":1e400}]}]}`, `{"version":1,"envelopes":null}`} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "results.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := results.Read(path)
		if err != nil {
			return
		}
		for _, e := range file.Envelopes {
			if err := e.Check(); err != nil {
				t.Fatalf("Read accepted %v", err)
			}
			for _, b := range e.Boundaries {
				_ = b.Describe(e.Unit)
			}
			if e.Edge != nil {
				_ = e.Edge.Describe(e.Unit)
			}
		}
		if err := results.Write(path, file); err != nil {
			t.Fatalf("Write of what Read read: %v", err)
		}
	})
}
