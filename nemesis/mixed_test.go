package nemesis

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMixedDrawsWhatApplies: a mixed schedule draws only the classes
// (and pairs) whose every scenario fits the cluster: the leader faults on
// ZooKeeper and etcd, the clock faults where the clock moves, a pair only
// where both halves apply.
func TestMixedDrawsWhatApplies(t *testing.T) {
	quorum := Servers | Minority | Leadership | Election | PeerLinks | ClientLinks
	for _, tc := range []struct {
		shape Shape
		want  []string
	}{
		{Shape{Nodes: 1, Caps: Servers | ClientLinks | MovableClock},
			[]string{"server-pause", "partition", "restart", "clock-jump", "clock-rate", "server-pause+partition", "restart+partition", "clock-jump+restart"}},
		{Shape{Nodes: 3, Caps: quorum},
			[]string{"server-pause", "crash-minority", "partition", "partition-leader", "partition-halves", "leader-kill", "restart",
				"server-pause+partition", "restart+partition"}},
		{Shape{Nodes: 2, Caps: Servers | Leadership}, []string{"server-pause", "restart"}},
	} {
		var got []string
		for _, c := range applicable(tc.shape) {
			got = append(got, c.name())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("shape %+v: mixed draws %v, want %v", tc.shape, got, tc.want)
		}
	}
}

// TestMixedScheduleFillsTheCase: a two-minute case gets an injection
// every few seconds, tens of them, and the same seed draws the same
// schedule; each class is drawn.
func TestMixedScheduleFillsTheCase(t *testing.T) {
	spec := loadOf(t, 2*time.Minute, 0)
	draw := func(seed uint64) ([]time.Duration, []int) {
		e := Env{Target: Target{Nodes: fakeNodes}, Spec: spec, Lease: 2 * time.Second, Injections: 3, Rand: rand.New(rand.NewPCG(seed, 0))}
		return e.mixSchedule(2*time.Second, 5)
	}
	at, drawn := draw(7)
	at2, drawn2 := draw(7)
	if !slices.Equal(at, at2) || !slices.Equal(drawn, drawn2) {
		t.Fatalf("seed 7 drew %v %v, then %v %v", at, drawn, at2, drawn2)
	}
	if len(at) < 20 || len(drawn) != 2*len(at) {
		t.Fatalf("%d injections in two minutes (%d classes drawn): want tens, and a class for each strike and its make-up", len(at), len(drawn))
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap < 3*time.Second {
			t.Fatalf("injections %d and %d are %v apart: their windows (2 s) and the gap after them (1 s) overlap", i, i+1, gap)
		}
	}
	for c := range 5 {
		if !slices.Contains(drawn[:len(at)], c) {
			t.Errorf("class %d never drawn in %v", c, drawn[:len(at)])
		}
	}
}

// TestComposedStrike: a pair strikes its parts in order, each on the
// targets it picked, within one window that lasts as long as the longer
// part's; the lasting parts heal in reverse order; the injection records
// the pair's class, every target and both effects.
func TestComposedStrike(t *testing.T) {
	defer goleak.VerifyNone(t)
	spec := loadOf(t, 1200*time.Millisecond, 0)
	e := Env{Target: Target{Nodes: fakeNodes}, Spec: spec, Lease: 200 * time.Millisecond, Injections: 1, Rand: rand.New(rand.NewPCG(1, 2))}
	var log []string
	part := func(name string, node int, lasts time.Duration) strike {
		s := strike{label: name, lasts: lasts, exclusion: true,
			pick: func(context.Context, int) ([]Node, error) { return fakeNodes[node : node+1], nil },
			do: func(_ context.Context, a attempt) (string, error) {
				a.struck()
				log = append(log, name+" "+names(a.nodes))
				return name + "d", nil
			}}
		if lasts > 0 {
			s.undo = func(_ context.Context, nodes []Node) error {
				log = append(log, "heal "+name+" "+names(nodes))
				return nil
			}
		}
		return s
	}
	c := composed("restart+partition", []strike{part("restart", 0, 0), part("cut", 2, 150*time.Millisecond)})
	if c.lasts != 150*time.Millisecond || !c.exclusion || c.class != "restart+partition" {
		t.Fatalf("composed strike %+v: want the longer window, exclusion, the pair's class", c)
	}
	n := newNemesis()
	n.plan = e.driveEach(e.slots(c.lasts, e.gap()), c.lasts, func(int) strike { return c })
	_, rec := runStretched(t, n, spec)
	if len(rec.Targets) != 1 || len(rec.Failures) != 0 {
		t.Fatalf("record %+v: want one injection, no failure", rec)
	}
	tg := rec.Targets[0]
	if tg.Class != "restart+partition" || !slices.Equal(tg.Nodes, []string{"a", "c"}) || tg.Tested == nil || !*tg.Tested ||
		!strings.Contains(tg.Effect, "restart (a): restartd") || !strings.Contains(tg.Effect, "cut (c): cutd") {
		t.Fatalf("injection %+v: want class restart+partition on a and c, tested, both effects", tg)
	}
	if want := []string{"restart a", "cut c", "heal cut c"}; !slices.Equal(log, want) {
		t.Fatalf("the parts ran %q, want %q", log, want)
	}
	if w := rec.Windows[0]; w.EndS-w.StartS < 0.15 {
		t.Fatalf("window %+v: shorter than the cut's 150 ms", w)
	}
}
