package answer

import (
	"slices"
	"testing"

	"github.com/lockbench/lockbench/results"
)

// TestMixedCountsPerClass: a mixed schedule's injections are evidence of
// the class each recorded, never of "mixed" as a whole: a lock bug after
// a restart+partition is that pair's, and the restarts keep their own
// clean count.
func TestMixedCountsPerClass(t *testing.T) {
	yes := true
	two := 3
	f := &results.File{Cases: []results.Case{{Backend: "zookeeper", Fault: "mixed?seconds=120", FaultClass: "mixed", Guard: "none",
		Durability: results.DurabilityFast, Injections: 3, InjectionsTested: &two, History: "h1", Targets: []results.Target{
			{Injection: 1, Class: "restart", Tested: &yes},
			{Injection: 2, Class: "restart+partition", Tested: &yes, Incidents: 1, IncidentsLockBug: 1},
			{Injection: 3, Class: "restart", Tested: &yes},
		}}}}
	ev := gather(f)
	if slices.Contains(ev.classes, "mixed") || !slices.Contains(ev.classes, "restart") || !slices.Contains(ev.classes, "restart+partition") {
		t.Fatalf("classes %v: want the injections' classes, not mixed", ev.classes)
	}
	b := ev.backends["zookeeper"]
	for cls, want := range map[string][2]int64{"restart": {2, 0}, "restart+partition": {1, 1}} {
		ce := b.classes[cls+"|"+results.DurabilityFast]
		if ce == nil || ce.tested != want[0] || ce.lockBug != want[1] {
			t.Errorf("class %s: %+v, want %d tested, %d lock bugs", cls, ce, want[0], want[1])
		}
	}
	if ce := b.classes["mixed|"+results.DurabilityFast]; ce != nil {
		t.Errorf("a class mixed pooled the schedule: %+v", ce)
	}
}
