package nemesis

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/workloads"
)

func fiveNodes() []Node {
	nodes := make([]Node, 5)
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
		e := Env{Target: Target{Nodes: nodes, Priority: []int{0}}, Spec: spec, Lease: time.Second, Injections: 3, Rand: rand.New(rand.NewPCG(seed, 0))}
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

// TestClientPausesNeverOverlap: in a case as long as MinDuration asks,
// client-pause stops a holder once per injection, each pause beginning
// after the previous one ended and a gap passed — even when grants come
// late — so that each pause is an incident of its own.
func TestClientPausesNeverOverlap(t *testing.T) {
	for _, spec := range []string{"client-pause", "client-pause?x=0.5", "client-pause?x=3"} {
		f, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		const lease, injections = time.Second, 3
		d := f.MinDuration(Shape{}, lease, injections)
		ws, _ := workloads.Spec{Workload: workloads.Hot, Clients: 1, Duration: d}.Normalize()
		pause, gap := clientPause(f.Params, lease), clientPauseGap(lease)
		for seed := range uint64(20) {
			section := f.Nemesis(Env{Spec: ws, Lease: lease, Injections: injections, Rand: rand.New(rand.NewPCG(seed, 0))}).plan.section
			var at []time.Duration
			// A grant every 7 ms, none while a paused holder holds the key.
			for g := time.Duration(0); g < d; g += 7 * time.Millisecond {
				if a := section(judge.SectionEvent{Granted: g}); a.Pause > 0 {
					if a.Pause != pause {
						t.Fatalf("%s: paused for %v, want %v", spec, a.Pause, pause)
					}
					at = append(at, g)
					g += a.Pause
				}
			}
			if len(at) != injections {
				t.Fatalf("%s seed %d: %d pauses in %v, want %d: at %v", spec, seed, len(at), d, injections, at)
			}
			for i := 1; i < len(at); i++ {
				if at[i] < at[i-1]+pause+gap {
					t.Fatalf("%s seed %d: pause at %v began before the one at %v had ended and %v passed", spec, seed, at[i], at[i-1], gap)
				}
			}
		}
	}
}
