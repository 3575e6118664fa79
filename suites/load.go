package suites

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/workloads"
)

// Load sizes the cases a suite's rules select: the performance sweep
// (each workload at each client count, over several trials, clients as
// goroutines), the fault matrix (on the hot key, or the workload a fault
// needs; clients as worker processes, the fault injected several times
// per case, judged under every guard at once) and the lease matrix.
type Load struct {
	// The performance sweep: Clients on the hot key, ManyKeysClients on
	// the workloads of many keys (Clients when empty), PerfTrials
	// trials of each; HotTrials, when set, caps the hot key's trials
	// below PerfTrials.
	Workloads       []workloads.Workload
	Clients         []int
	ManyKeysClients []int
	PerfSeconds     float64
	PerfTrials      int
	HotTrials       int

	// The fault matrix.
	FaultClients int
	FaultSeconds float64
	Trials       int
	// Injections is how many times each fault case injects its fault.
	Injections int
	// Guards are the resource guards every fault case is judged under;
	// PauseGuards are added under client-pause.
	Guards      []judge.Guard
	PauseGuards []judge.Guard

	// Leases is the lease matrix: loads that provoke a lease's
	// accounting, each under its faults on every backend the suite runs
	// the fault's class on.
	Leases []LeaseLoad

	// The load itself.
	TTL   time.Duration
	Keys  int
	Hold  workloads.Dist
	Think workloads.Dist
}

// LeaseLoad is a load of a suite's lease matrix — one that provokes a
// lease's accounting, which the fault matrix's millisecond holds against
// second-long TTLs never do — with the faults it runs under: each on the
// hot key, on every backend the fault applies to, with clients as
// processes, under the fast profile, judged under the suite's guards and
// fence-rw: a successor that holds seconds before its first write leaves
// a fence on writes alone open to the late write it is meant to stop.
type LeaseLoad struct {
	// HoldLeft, AutoExtend and Hold are the load's (workloads.Spec):
	// holders hold a fraction, up to HoldLeft, of the validity their
	// lease has left, or their lease extends itself while they hold Hold
	// (several TTLs). Hold zero keeps the suite's.
	HoldLeft   float64
	AutoExtend bool
	Hold       workloads.Dist
	// HoldFor, when set, is how long each holder holds whatever its
	// lease says (workloads.Spec.HoldFor): long holds through faults.
	HoldFor time.Duration
	// AcquireTimeout bounds each acquire (the default when 0): on holds
	// of several TTLs, waiters wait longer.
	AcquireTimeout time.Duration
	// Clients, Seconds and Injections (the suite's when 0) size each
	// case.
	Clients    int
	Seconds    float64
	Injections int
	// Faults are the faults the load runs under, as on the command line
	// ("none" for none).
	Faults []string
}

// Suite is a suite read from the case table: its name (as results.json
// records it), its load and its rules.
type Suite struct {
	Name string
	Load
	Rules []Rule

	// narrow and faults are what Narrow and WithFaults set.
	narrow []string
	faults []string
}

// Named returns the predefined suite of that name (default, quick or
// full): its load, and the rules of Table that it holds.
func Named(name string) (Suite, error) {
	for _, n := range names {
		if n.name == name {
			return Suite{Name: name, Load: loadOf(n.set), Rules: RulesIn(n.set)}, nil
		}
	}
	return Suite{}, fmt.Errorf("%w: suite %q: want default, quick or full", bench.ErrConfig, name)
}

// Default is `make bench`: every backend, a client sweep on a hot key and
// on 100 keys, and the fault catalogue, within about 15 minutes on 2
// cores.
func Default() Suite { s, _ := Named("default"); return s }

// Quick is `make bench-quick`: a smoke run of a few minutes over every
// backend.
func Quick() Suite { s, _ := Named("quick"); return s }

// Full is `make bench-full`: the default suite with every profile, size
// and backend, split views, long holds and mixed schedules: about four times
// the default's planned load (434 cases, about 46 minutes against its 12).
func Full() Suite { s, _ := Named("full"); return s }

// RulesIn returns the rules of Table that suites in hold, in order.
func RulesIn(in Set) []Rule {
	var out []Rule
	for _, r := range Table {
		if r.In&in != 0 {
			out = append(out, r)
		}
	}
	return out
}

// loadOf returns the load of the predefined suite in.
func loadOf(in Set) Load {
	hold, _ := workloads.Constant(time.Millisecond)
	l := Load{
		Workloads: []workloads.Workload{workloads.Hot, workloads.UniformKeys},
		// Throughput against clients: 1, 4 and 16 on one key (where
		// clients queue, each waiting for the others: one trial, the
		// curve's shape), 1, 16 and 64 on 100 keys, where the locks' own
		// speed shows and the answer ranks speed at each lock's peak
		// (three independent trials). (64 clients on one key make a
		// history whose linearizability check does not finish.) 0.5 s a
		// case: on fresh servers under load, 0.3 s trials saw no grant at
		// all.
		Clients:         []int{1, 4, 16},
		ManyKeysClients: []int{1, 16, 64},
		PerfSeconds:     0.5,
		PerfTrials:      3,
		HotTrials:       1,
		FaultClients:    6,
		FaultSeconds:    5,
		Trials:          1,
		Injections:      3,
		Guards:          []judge.Guard{judge.GuardNone, judge.GuardFence},
		PauseGuards:     []judge.Guard{judge.GuardCAS},
		// Leases that extend themselves while their holders hold several
		// TTLs, and a pause that strikes inside an extension: a section
		// long enough that a late write lands inside its successor's
		// read-modify-write, which a write-only fence cannot stop.
		Leases: []LeaseLoad{autoExtendLoad(time.Second, 5, 2, "client-pause?at=extend")},
		TTL:    time.Second,
		Keys:   100,
		Hold:   hold,
	}
	switch in {
	case InQuick:
		l.Workloads = []workloads.Workload{workloads.Hot}
		l.Clients, l.ManyKeysClients, l.HotTrials = []int{1, 16}, nil, 0
		l.PerfTrials = 1
		l.FaultClients, l.FaultSeconds, l.Injections = 4, 4, 2
		l.Leases = nil
	case InFull:
		// The full suite keeps a sweep of two client counts a workload,
		// every trial on the hot key too.
		l.Clients, l.ManyKeysClients, l.HotTrials = []int{1, 16}, []int{16, 64}, 0
		// Holders that hold up to all the validity their lease has left,
		// and more faults.
		l.Leases = []LeaseLoad{
			validityLoad(4, "none", "client-pause?at=acquire", "client-pause?at=after-write"),
			autoExtendLoad(l.TTL, 8, 0, "none", "client-pause?at=extend", "client-pause?at=extend&x=0.5", "server-pause", "partition"),
			longHoldLoad(l.TTL, "partition-leader", "leader-kill"),
		}
	}
	return l
}

// validityLoad is the lease matrix's load whose holders hold a random
// fraction, up to all, of the validity their lease has left, for seconds
// under each of faults.
func validityLoad(seconds float64, faults ...string) LeaseLoad {
	return LeaseLoad{HoldLeft: 1, Clients: 4, Seconds: seconds, Faults: faults}
}

// longHoldLoad is the lease matrix's load whose holders hold three TTLs
// (of ttl), auto-extending, through leader faults: a
// session or lease that dies while its holder works, a waiter granted
// while it was still alive, show in the history; four clients on one
// key, each waiting behind the others' holds.
func longHoldLoad(ttl time.Duration, faults ...string) LeaseLoad {
	return LeaseLoad{AutoExtend: true, HoldFor: 3 * ttl, AcquireTimeout: 4*3*ttl + 5*time.Second, Clients: 4, Faults: faults}
}

// autoExtendLoad is the lease matrix's load whose leases (of TTL ttl)
// extend themselves while their holders hold two to three TTLs, for
// seconds under each of faults, injected injections times (the suite's
// when 0): three clients on one key, so that one is waiting when a lease
// lapses.
func autoExtendLoad(ttl time.Duration, seconds float64, injections int, faults ...string) LeaseLoad {
	hold, _ := workloads.Uniform(2*ttl, 3*ttl)
	return LeaseLoad{AutoExtend: true, Hold: hold, AcquireTimeout: 10 * ttl, Clients: 3, Seconds: seconds, Injections: injections,
		Faults: faults}
}
