package report_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// backendSpec is how a simulated backend behaves in the fixture: its
// cost, its speed, whether it issues fencing tokens, and how it serves
// under each fault it faces.
type backendSpec struct {
	name          string
	nodes, quorum int
	latencyUS     float64 // median uncontended acquire
	capacity      float64 // grants/s ceiling on distinct keys
	tokens        bool
	guarantee     string
	// faults are the fault names (with params) the backend runs, each
	// with the share of its baseline it serves inside a window and its
	// recovery time after one.
	faults map[string]service
}

type service struct {
	share, recovery float64
}

// The catalogue of the fixture, as a future default suite would run it.
var (
	pauseShort = "client-pause?x=0.5"
	pauseLong  = "client-pause?x=3"
	jumpMinor  = "clock-jump?by=0.5&nodes=minority"
	jumpMajor  = "clock-jump?by=1&nodes=majority"
)

var fixtureBackends = []backendSpec{
	{"etcd", 3, 2, 2500, 3000, true, "raft quorum; lease + create revision", map[string]service{
		pauseShort: {0.8, 0.1}, pauseLong: {0.3, 0.2}, "server-pause": {0.35, 1.4}, "crash-minority": {0.5, 1.1}, "partition-leader": {0.3, 1.6}}},
	{"noop", 0, 0, 5, 200000, false, "none: no mutual exclusion (control)", map[string]service{pauseShort: {1, 0}, pauseLong: {1, 0}}},
	{"redis", 1, 1, 150, 40000, true, "one node; lost on restart without persistence", map[string]service{
		pauseShort: {0.8, 0.1}, pauseLong: {0.3, 0.2}, "server-pause": {0, 0.3}, "restart": {0, 0.4}, jumpMajor: {1.2, 0}}},
	{"redlock", 5, 3, 600, 12000, true, "majority of 5 masters; quarantine on restart", map[string]service{
		pauseShort: {0.8, 0.1}, pauseLong: {0.3, 0.2}, "server-pause": {0.85, 0.1}, "restart": {0.7, 0.2}, "crash-minority": {0.85, 0.1}, jumpMinor: {1, 0}, jumpMajor: {1.3, 0}}},
	{"redlock?quarantine=false", 5, 3, 600, 12000, true, "majority of 5 masters; no quarantine", map[string]service{"restart": {0.75, 0.2}}},
	{"redsync", 5, 3, 900, 6000, false, "majority of 5 masters", map[string]service{
		pauseShort: {0.8, 0.1}, pauseLong: {0.3, 0.2}, "server-pause": {0.8, 0.1}, "restart": {0.7, 0.2}, "crash-minority": {0.8, 0.1}, jumpMinor: {1, 0}, jumpMajor: {1.3, 0}}},
	{"sentinel", 3, 1, 200, 35000, true, "master with async replicas", map[string]service{
		pauseShort: {0.8, 0.1}, pauseLong: {0.3, 0.2}, "server-pause": {0.2, 3}, "failover": {0.05, 2.5}, jumpMajor: {1.2, 0}}},
	{"zookeeper", 3, 2, 1800, 5000, true, "zab quorum; ephemeral sequential znodes", map[string]service{
		pauseShort: {0.8, 0.1}, pauseLong: {0.3, 0.2}, "server-pause": {0.35, 1.3}, "crash-minority": {0.5, 1.2}, "partition-leader": {0.3, 1.5}}},
}

const (
	holdUS     = 200.0
	duration   = 20.0
	step       = 0.5
	injections = 4
	perfTrials = 3
	// faultTrials is 3, the fewest from which availability can set a
	// backend apart.
	faultTrials = 3
)

// fixture builds a realistic results file in the shape issues 10–12
// give it: every backend without faults on a hot key and on distinct
// keys at 1/4/16/64 clients (goroutine clients, 3 trials, fast profile),
// then each fault the backend faces with and without fencing, worker
// processes, 4 injections per case and 3 trials; restart also under the
// durable profile; one invalid case; the classes that cannot apply
// recorded as skipped.
type fixture struct {
	t   *testing.T
	rng *rand.Rand
	f   *results.File
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	start := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)
	fx := &fixture{t: t, rng: rand.New(rand.NewPCG(1, 2)), f: &results.File{
		Version: results.Version, Started: start, Finished: start.Add(14 * time.Minute),
		Hosts: []string{"bench-1"}, Machine: "2 cores, linux/amd64", Command: "lockbench run --suite default --seed 20260314",
		RunID: "r20260314-0930", Seed: 20260314, Suite: "default", Cores: 2, MemoryBytes: 24 << 30,
		Versions: map[string]string{"lockbench": "v0.12.0", "go": "go1.26.8", "redis-server": "7.0.15", "zookeeper": "3.8.4", "etcd": "3.7.3"},
	}}
	for _, b := range fixtureBackends {
		if strings.Contains(b.name, "?") {
			continue // variants run only the faults they exist for
		}
		for _, w := range []string{"hot", "uniform"} {
			for _, c := range []int{1, 4, 16, 64} {
				for trial := 1; trial <= perfTrials; trial++ {
					fx.add(b, w, "none", []string{"none"}, c, trial, results.DurabilityFast)
				}
			}
		}
	}
	for _, b := range fixtureBackends {
		for _, fault := range slices.Sorted(maps.Keys(b.faults)) {
			for trial := 1; trial <= faultTrials; trial++ {
				fx.add(b, "hot", fault, []string{"none", "fence"}, 8, trial, results.DurabilityFast)
				if fault == "restart" && b.name == "redis" {
					fx.add(b, "hot", fault, []string{"none", "fence"}, 8, trial, results.DurabilityDurable)
				}
			}
		}
	}
	for _, b := range []string{"etcd", "zookeeper"} {
		fx.f.Skipped = append(fx.f.Skipped, results.Skip{Backend: b, FaultClass: "clock-jump",
			Reason: b + " leases run on the servers' monotonic clocks, which a wall-clock jump does not move; clock-jump is a Redis key-expiry emulation"})
	}
	fx.f.Skipped = append(fx.f.Skipped, results.Skip{Backend: "redis", FaultClass: "crash-minority", Reason: "a single node has no minority to crash"})
	// One injection failed: its case is invalid.
	for i := range fx.f.Cases {
		c := &fx.f.Cases[i]
		if c.Backend == "zookeeper" && c.Fault == "server-pause" && c.Trial == 2 {
			c.Invalid, c.InvalidReason = true, "SIGSTOP of zk-2 failed: no such process (the member had exited)"
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

// windows are the fault windows of a fault case: four of a second each.
func windows(fault string) []results.Window {
	var ws []results.Window
	for i := range injections {
		start := 3 + 4*float64(i)
		ws = append(ws, results.Window{Label: fmt.Sprintf("%s #%d", strings.SplitN(fault, "?", 2)[0], i+1), StartS: start, EndS: start + 1})
	}
	return ws
}

// add measures one run and writes a case per guard, as the runner
// does: the run's grants, latencies, incidents and verdicts are the
// same in each; what the resource let through depends on the guard.
func (fx *fixture) add(b backendSpec, workload, fault string, guards []string, clients, trial int, durability string) {
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
	class, _, _ := strings.Cut(fault, "?")
	c := results.Case{
		Backend: b.name, Workload: workload, Fault: fault, FaultClass: class,
		Clients: clients, Trial: trial, Host: "bench-1", Keys: 1, TTLMillis: 1000, DurationS: duration,
		Nodes: b.nodes, Quorum: b.quorum, Guarantee: b.guarantee, Errors: map[string]int64{},
		TimelineStepS: step, Durability: durability, ClientsAs: results.ClientsGoroutines, Seed: uint64(fx.rng.Int64()),
		Linearizable: results.Linearizable, LinearizableFenced: results.Linearizable, FreshServers: true,
	}
	if b.name == "noop" {
		c.Durability, c.Control = "", true
	}
	if !b.tokens {
		c.LinearizableFenced, c.LinearizableFencedReason = results.Unknown, "the backend issues no tokens"
	}
	if workload == "uniform" {
		c.Keys = 1000
	}
	svc := service{share: 1}
	if fault != "none" {
		svc = b.faults[fault]
		c.ClientsAs = results.ClientsProcesses
		c.FaultWindows = windows(fault)
		c.Injections = injections
		c.History = fmt.Sprintf("histories/%s-%s-%s-%d.jsonl", strings.NewReplacer("?", "_", "&", "_", "=", "-").Replace(b.name), strings.NewReplacer("?", "_", "&", "_", "=", "-").Replace(fault), durability, trial)
		for i := 1; i <= injections; i++ {
			node := fmt.Sprintf("%s-%d", b.name, 1+fx.rng.IntN(max(b.nodes, 1)))
			if class == "client-pause" {
				node = fmt.Sprintf("worker-%d", 1+fx.rng.IntN(clients))
			}
			c.Targets = append(c.Targets, results.Target{Injection: i, Nodes: []string{node}, Leader: class != "client-pause" && fx.rng.IntN(3) == 0,
				Priority: b.name == "redlock" && strings.HasSuffix(node, "-1")})
		}
	}
	inWindow := func(t float64) bool {
		for _, w := range c.FaultWindows {
			if t >= w.StartS && t < w.EndS {
				return true
			}
		}
		return false
	}
	var base, inFault float64
	var nb, nf int
	for i := 0; float64(i)*step < duration; i++ {
		t := float64(i) * step
		v := tp * step * (1 + 0.08*(fx.rng.Float64()-0.5))
		if inWindow(t) {
			v *= svc.share * (1 + 0.1*(fx.rng.Float64()-0.5))
			inFault += v / step
			nf++
		} else if t < 3 {
			base += v / step
			nb++
		}
		c.Timeline = append(c.Timeline, int64(v))
		c.Acquired += int64(v)
	}
	c.Throughput = float64(c.Acquired) / duration
	switch {
	case clients < 2:
	case workload == "uniform": // 1000 keys: a waiter on the same key is rare
		c.ContendedGrants = c.Acquired / 20
	default:
		c.ContendedGrants = c.Acquired
	}
	if fault != "none" {
		av := &results.Availability{BaselineThroughput: base / float64(max(nb, 1)), InFaultThroughput: inFault / float64(max(nf, 1)), InFaultP99US: int64(wait * 8 / math.Max(svc.share, 0.05))}
		for range injections {
			av.RecoveryS = append(av.RecoveryS, svc.recovery*(1+0.2*(fx.rng.Float64()-0.5)))
			// Each window's grants/s, as the runner records them: one
			// availability sample per injection.
			av.WindowThroughput = append(av.WindowThroughput, av.InFaultThroughput*(1+0.2*(fx.rng.Float64()-0.5)))
		}
		c.Availability = av
	}
	c.Histograms.Acquire = fx.histogram(400, wait)
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
	stale := fx.violations(&c, b)
	if c.Incidents > 0 {
		c.Linearizable, c.LinearizableReason = results.NotLinearizable, "two holders of one key at once"
	}
	if c.Injections > 0 {
		c.IncidentRateUpper95 = stats.Rate{K: c.Incidents, N: int64(c.Injections)}.Upper95()
	}
	for _, guard := range guards {
		g := c
		g.Guard, g.Fencing = guard, guard == "fence" && b.tokens
		stale(&g)
		fx.f.Cases = append(fx.f.Cases, g)
	}
}

// violations sets the safety counts the theory predicts for the run —
// incidents classified as the judge would, token regressions, notes —
// and returns what sets a guard's case apart: the stale writes its
// resource accepted or rejected, the updates lost.
func (fx *fixture) violations(c *results.Case, b backendSpec) func(*results.Case) {
	var stale, staleFenced int64 // stale writes; those a fencing resource still lets through
	lockBug := func(incidents, overlaps int64, note string) {
		c.IncidentsLockBug += incidents
		c.Incidents += incidents
		c.OverlapsLockBug += overlaps
		c.Overlaps += overlaps
		c.Notes = append(c.Notes, note)
	}
	expired := func(incidents, overlaps int64) {
		c.IncidentsExpiredHolder += incidents
		c.Incidents += incidents
		c.OverlapsExpiredHolder += overlaps
		c.Overlaps += overlaps
	}
	var noopLost int64
	switch {
	case b.name == "noop" && c.Clients >= 2:
		c.Overlaps = c.Acquired / 3
		if c.Workload == "uniform" {
			c.Overlaps = int64(c.Clients * 3)
		}
		c.Incidents = max(c.Overlaps/5, 1)
		c.IncidentsLockBug, c.OverlapsLockBug = c.Incidents, c.Overlaps
		noopLost = c.Overlaps / 2
		if c.FaultClass == "client-pause" {
			stale = 4
		}
	case c.Fault == pauseLong: // every pause outlives the lease
		expired(injections, 3*injections)
		stale = injections
	case c.Fault == "failover": // the promoted replica never saw the lock, nor the last INCR
		lockBug(2, 2+int64(c.Trial), "replica promoted without the lock key (asynchronous replication)")
		c.TokenRegressions, stale, staleFenced = 1, 2, 1
		c.LinearizableFenced, c.LinearizableFencedReason = results.NotLinearizable, "a later grant carried a lower token"
	case c.Fault == "restart" && (b.name == "redsync" || b.name == "redlock?quarantine=false"):
		lockBug(2, 3, "restarted node came back empty and voted at once: no quarantine")
		stale = 2
	case c.Fault == "restart" && b.name == "redis" && c.Durability == results.DurabilityFast:
		lockBug(1, 2, "restart without persistence: lock and token counter lost")
		c.TokenRegressions, stale, staleFenced = 1, 2, 1
		c.LinearizableFenced, c.LinearizableFencedReason = results.NotLinearizable, "a later grant carried a lower token"
	case c.Fault == "restart" && b.name == "redis":
		c.Notes = append(c.Notes, "restart with appendfsync always: the lock survived")
	case c.Fault == "restart" && b.name == "redlock":
		c.Notes = append(c.Notes, "restarted node quarantined for one max TTL")
	case c.Fault == jumpMajor:
		lockBug(injections, 2*injections, "expiry moved on a majority: every key there expired at once")
		stale = injections
	}
	return func(g *results.Case) {
		g.LostUpdates = noopLost
		switch {
		case g.Fencing:
			g.StaleAccepted, g.StaleRejected = staleFenced, stale-staleFenced
		default:
			g.StaleAccepted = stale
			g.LostUpdates += stale / 2
		}
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
