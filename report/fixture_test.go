package report_test

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lockbench/lockbench/results"
)

// backendSpec is how a simulated backend behaves in the fixture: its
// cost, its speed and whether it issues fencing tokens.
type backendSpec struct {
	name            string
	nodes, quorum   int
	latencyUS       float64 // median uncontended acquire
	capacity        float64 // grants/s ceiling on distinct keys
	tokens          bool
	guarantee       string
	crashesMinority bool // has a minority to crash
}

var fixtureBackends = []backendSpec{
	{"etcd", 3, 2, 2500, 3000, true, "raft quorum; lease + create revision", true},
	{"noop", 0, 0, 5, 200000, false, "none: no mutual exclusion (control)", false},
	{"redis", 1, 1, 150, 40000, true, "one node; lost on restart without persistence", false},
	{"redlock", 5, 3, 600, 12000, true, "majority of 5 masters; quarantine on restart", true},
	{"redsync", 5, 3, 900, 6000, false, "majority of 5 masters", true},
	{"sentinel", 3, 1, 200, 35000, true, "master with async replicas", false},
	{"zookeeper", 3, 2, 1800, 5000, true, "zab quorum; ephemeral sequential znodes", true},
}

const (
	holdUS   = 200.0
	duration = 20.0
	step     = 0.5
)

// fixture builds a realistic results file: every backend without faults
// on a hot key and on distinct keys at 1/4/16/64 clients with and
// without fencing, then client-pause, failover, restart and
// crash-minority where they apply, two trials each.
type fixture struct {
	t   *testing.T
	rng *rand.Rand
	f   *results.File
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	start := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)
	fx := &fixture{t: t, rng: rand.New(rand.NewPCG(1, 2)), f: &results.File{
		Version: results.Version, Started: start, Finished: start.Add(47 * time.Minute),
		Hosts: []string{"bench-1"}, Machine: "2 cores, linux/amd64", Command: "lockbench run --all",
	}}
	for _, b := range fixtureBackends {
		for _, w := range []string{"hot", "uniform"} {
			for _, c := range []int{1, 4, 16, 64} {
				for _, guard := range []string{"none", "fence"} {
					for trial := 1; trial <= 2; trial++ {
						fx.add(b, w, "none", guard, c, trial)
					}
				}
			}
		}
	}
	for _, b := range fixtureBackends {
		for _, guard := range []string{"none", "fence"} {
			for trial := 1; trial <= 2; trial++ {
				fx.add(b, "hot", "client-pause", guard, 16, trial)
				switch b.name {
				case "sentinel":
					fx.add(b, "hot", "failover", guard, 16, trial)
				case "redlock", "redsync", "redis":
					fx.add(b, "hot", "restart", guard, 16, trial)
				}
				if b.crashesMinority {
					fx.add(b, "hot", "crash-minority", guard, 16, trial)
				}
			}
		}
	}
	return fx
}

// histogram records n values around median µs — log-normal with a 1%
// tail five to fifteen times slower — and returns its encoding.
func (fx *fixture) histogram(n int, median float64) string {
	h := results.NewHistogram()
	for range n {
		v := median * math.Exp(0.45*fx.rng.NormFloat64())
		if fx.rng.Float64() < 0.01 {
			v *= 5 + 10*fx.rng.Float64()
		}
		if err := h.RecordValue(int64(math.Max(v, 1))); err != nil {
			fx.t.Fatal(err)
		}
	}
	s, err := results.Encode(h)
	if err != nil {
		fx.t.Fatal(err)
	}
	return s
}

func (fx *fixture) add(b backendSpec, workload, fault, guard string, clients, trial int) {
	jitter := 1 + 0.06*(fx.rng.Float64()-0.5)
	var tp, wait float64
	if workload == "hot" {
		tp = 1e6 / (holdUS + b.latencyUS) * (1 - 0.5/float64(clients))
		wait = b.latencyUS + float64(clients-1)*(holdUS+b.latencyUS)/2
		if b.name == "noop" { // no exclusion: nobody waits
			tp = math.Min(float64(clients)*1e6/(holdUS+b.latencyUS), b.capacity)
			wait = b.latencyUS
		}
	} else {
		tp = math.Min(float64(clients)*1e6/(holdUS+2*b.latencyUS), b.capacity)
		wait = b.latencyUS * (1 + 0.03*float64(clients))
	}
	tp *= jitter
	c := results.Case{
		Backend: b.name, Workload: workload, Fault: fault, Guard: guard, Fencing: guard == "fence" && b.tokens,
		Clients: clients, Trial: trial, Host: "bench-1", Keys: 1, TTLMillis: 1000, DurationS: duration,
		Nodes: b.nodes, Quorum: b.quorum, Guarantee: b.guarantee, Errors: map[string]int64{},
		TimelineStepS: step,
	}
	if workload == "uniform" {
		c.Keys = 1000
	}
	// The timeline: grants per step, with the fault's effect.
	var window results.Window
	dip := func(t float64) float64 { return 1 }
	switch fault {
	case "client-pause":
		window = results.Window{Label: "holder paused", StartS: 6, EndS: 9}
		dip = func(t float64) float64 { // the paused holder blocks the hot key until its TTL ends
			if t >= 6 && t < 7 {
				return 0
			}
			return 1
		}
	case "failover":
		window = results.Window{Label: "master killed", StartS: 6, EndS: 8.5}
		dip = func(t float64) float64 {
			if t >= 6 && t < 8.5 {
				return 0.02
			}
			return 1
		}
	case "restart":
		window = results.Window{Label: "node restart", StartS: 6, EndS: 7}
		dip = func(t float64) float64 {
			if t >= 6 && t < 7 {
				if b.name == "redis" {
					return 0
				}
				return 0.6
			}
			return 1
		}
	case "crash-minority":
		window = results.Window{Label: "minority down", StartS: 6, EndS: 12}
		dip = func(t float64) float64 {
			switch {
			case t >= 6 && t < 7 && (b.name == "etcd" || b.name == "zookeeper"):
				return 0.1 // leader election
			case t >= 6 && t < 12:
				return 0.85
			}
			return 1
		}
	}
	if fault != "none" {
		c.FaultWindows = []results.Window{window}
	}
	for i := 0; float64(i)*step < duration; i++ {
		v := tp * step * dip(float64(i)*step) * (1 + 0.08*(fx.rng.Float64()-0.5))
		c.Timeline = append(c.Timeline, int64(v))
		c.Acquired += int64(v)
	}
	c.Throughput = float64(c.Acquired) / duration
	c.Histograms.Acquire = fx.histogram(600, wait)
	c.Histograms.Hold = fx.histogram(100, holdUS)
	c.Histograms.Release = fx.histogram(100, b.latencyUS/2+1)
	for _, x := range []struct {
		enc string
		p   *results.Percentiles
	}{{c.Histograms.Acquire, &c.LatencyUS}, {c.Histograms.Hold, &c.HoldUS}, {c.Histograms.Release, &c.ReleaseUS}} {
		h, err := results.Decode(x.enc)
		if err != nil {
			fx.t.Fatal(err)
		}
		*x.p = results.Summarise(h)
	}
	c.Errors[results.ErrNotAcquired] = int64(fx.rng.IntN(5))
	fx.violations(&c, b)
	fx.f.Cases = append(fx.f.Cases, c)
}

// violations sets the safety counts the theory predicts for the case.
func (fx *fixture) violations(c *results.Case, b backendSpec) {
	fenced := c.Guard == "fence"
	stale := func(n int64) {
		if fenced && b.tokens {
			c.StaleRejected += n
		} else {
			c.StaleAccepted += n
			c.LostUpdates += n / 2
		}
	}
	switch {
	case b.name == "noop" && c.Clients >= 2:
		c.Overlaps = c.Acquired / 3
		if c.Workload == "uniform" {
			c.Overlaps = int64(c.Clients * 3)
		}
		c.LostUpdates = c.Overlaps / 2
		if c.Fault == "client-pause" {
			stale(4)
		}
	case c.Fault == "client-pause":
		c.Overlaps = 3 + int64(c.Trial)
		stale(3 + int64(c.Trial))
	case c.Fault == "failover": // the promoted replica never saw the lock, nor the last INCR
		c.Overlaps = 2 + int64(c.Trial)
		c.Notes = append(c.Notes, "replica promoted without the lock key (asynchronous replication)")
		if fenced {
			c.TokenRegressions = 1
			c.StaleAccepted = 1
		} else {
			stale(2)
		}
	case c.Fault == "restart" && b.name == "redsync":
		c.Overlaps = 3
		c.Notes = append(c.Notes, "restarted node came back empty; redsync has no quarantine")
		stale(2)
	case c.Fault == "restart" && b.name == "redis":
		c.Overlaps = 2
		c.Notes = append(c.Notes, "restart without persistence: lock and token counter lost")
		if fenced {
			c.TokenRegressions = 1
			c.StaleAccepted = 1
		} else {
			stale(2)
		}
	case c.Fault == "restart" && b.name == "redlock":
		c.Notes = append(c.Notes, "restarted node quarantined for one max TTL")
	}
}

// without returns a copy of f without the cases drop selects.
func without(f *results.File, drop func(*results.Case) bool) *results.File {
	g := *f
	g.Cases = slices.DeleteFunc(slices.Clone(f.Cases), func(c results.Case) bool { return drop(&c) })
	return &g
}

// edit returns a copy of f with fn applied to every case; f is left as
// it was.
func edit(f *results.File, fn func(*results.Case)) *results.File {
	g := *f
	g.Cases = slices.Clone(f.Cases)
	for i := range g.Cases {
		g.Cases[i].Notes = slices.Clone(g.Cases[i].Notes)
		g.Cases[i].Errors = maps.Clone(g.Cases[i].Errors)
		g.Cases[i].Timeline = slices.Clone(g.Cases[i].Timeline)
		fn(&g.Cases[i])
	}
	return &g
}
