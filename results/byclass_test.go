package results

import (
	"slices"
	"testing"
)

// TestByClass: a mixed case splits into one view per class of its
// injections, each with only its injections and their tested count; a
// case whose injections carry no class is itself.
func TestByClass(t *testing.T) {
	yes, no := true, false
	five := 5
	c := &Case{Backend: "zookeeper", Fault: "mixed", FaultClass: "mixed", Injections: 4, InjectionsTested: &five, Targets: []Target{
		{Injection: 1, Class: "restart", Tested: &yes, IncidentsLockBug: 1},
		{Injection: 2, Class: "restart+partition", Tested: &no},
		{Injection: 3, Class: "restart", Tested: &no},
		{Injection: 4, Class: "restart+partition", Tested: &yes},
	}}
	views := c.ByClass()
	if len(views) != 2 {
		t.Fatalf("%d views, want 2", len(views))
	}
	for i, want := range []struct {
		class    string
		injected []int
		tested   int
	}{{"restart", []int{1, 3}, 1}, {"restart+partition", []int{2, 4}, 1}} {
		v := views[i]
		var got []int
		for _, tg := range v.Targets {
			got = append(got, tg.Injection)
		}
		if v.FaultClass != want.class || !slices.Equal(got, want.injected) || v.Injections != len(want.injected) || *v.InjectionsTested != want.tested {
			t.Errorf("view %d: class %q injections %v (%d, %d tested), want %q %v (%d tested)", i, v.FaultClass, got, v.Injections,
				*v.InjectionsTested, want.class, want.injected, want.tested)
		}
	}
	if c.FaultClass != "mixed" || len(c.Targets) != 4 {
		t.Fatalf("ByClass changed its case: %+v", c)
	}
	plain := &Case{FaultClass: "restart", Targets: []Target{{Injection: 1}}}
	if v := plain.ByClass(); len(v) != 1 || v[0] != plain {
		t.Fatalf("a case without classes: %v, want itself", v)
	}
}
