package nemesis

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/workloads"
)

func fiveNodes() []*compose.Node {
	nodes := make([]*compose.Node, 5)
	for i := range nodes {
		nodes[i] = &compose.Node{Name: string(rune('a' + i))}
	}
	return nodes
}

// TestTargetsFollowTheSeed: the same seed picks the same targets at the
// same times; over five seeds the minorities of five nodes include the
// priority node, and the record says so.
func TestTargetsFollowTheSeed(t *testing.T) {
	nodes := fiveNodes()
	spec, _ := workloads.Spec{Workload: workloads.Hot, Clients: 1, Duration: 8 * time.Second}.Normalize()
	draw := func(seed uint64) ([]time.Duration, [][]string, bool) {
		e := Env{Target: Target{Redis: nodes, Priority: []int{0}}, Spec: spec, Lease: time.Second, Injections: 3, Rand: rand.New(rand.NewPCG(seed, 0))}
		at := e.slots(e.window(), e.gap())
		var picks [][]string
		priority := false
		for range at {
			m := e.minority()
			d := e.describe(t.Context(), m)
			picks = append(picks, d.Nodes)
			priority = priority || d.Priority
			if d.Priority != slices.Contains(d.Nodes, "a") {
				t.Fatalf("minority %v recorded priority=%v", d.Nodes, d.Priority)
			}
		}
		return at, picks, priority
	}
	at1, p1, _ := draw(7)
	at2, p2, _ := draw(7)
	if !slices.Equal(at1, at2) || len(p1) != 3 || !slices.EqualFunc(p1, p2, slices.Equal) {
		t.Fatalf("seed 7 drew %v at %v, then %v at %v", p1, at1, p2, at2)
	}
	for _, p := range p1 {
		if len(p) != 2 {
			t.Fatalf("minority of five: %v", p)
		}
	}
	hits := 0
	for seed := range uint64(5) {
		if _, _, hit := draw(seed); hit {
			hits++
		}
	}
	if hits == 0 {
		t.Fatal("five seeds of three minorities never hit the priority node")
	}
	t.Logf("the priority node was hit in %d of 5 seeds", hits)
}

func TestSlotsFitTheCase(t *testing.T) {
	spec, _ := workloads.Spec{Workload: workloads.Hot, Clients: 1, Duration: 8 * time.Second}.Normalize()
	e := Env{Spec: spec, Injections: 10, Rand: rand.New(rand.NewPCG(1, 1))}
	at := e.slots(time.Second, time.Second)
	if len(at) != 3 {
		t.Fatalf("%d slots of 1s+1s in the middle 6s of 8s: want 3", len(at))
	}
	for i, s := range at {
		if s < spec.Duration/8 || s+time.Second > spec.Duration-spec.Duration/8 || (i > 0 && s < at[i-1]+2*time.Second) {
			t.Fatalf("slots %v do not fit", at)
		}
	}
}
