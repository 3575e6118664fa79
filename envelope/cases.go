package envelope

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/worker"
	"github.com/lockbench/lockbench/workloads"
)

// manyKeys are the keys of a probe whose fault needs many (as the
// suites' uniform loads have).
const manyKeys = 100

// Cases probes a lock's family with real cases: each probe is one case of
// the runner (bench), the family's fault at the size probed injected n
// times into client worker processes on one hot key (or the many keys its
// fault needs), judged under each guard, in a run dir of its own whose
// seed replays it.
type Cases struct {
	Clusters *bench.Clusters
	// Worker starts the client processes (worker.Default when zero).
	Worker  worker.Command
	Backend bench.Backend
	Family  Family
	// Guards judge each probe side by side: late writes are counted per
	// guard.
	Guards  []judge.Guard
	Clients int
	// Dir is the envelope run's dir: probe i writes under
	// Dir/points/<Sub>-<i>.
	Dir, Sub string
	// Deadline is when the search's time is spent: a probe that would not
	// end before it (by the last probe's length) is not started.
	Deadline time.Time
	// Results are every case the probes measured, their histories'
	// paths relative to Dir.
	Results []results.Case

	last  time.Duration
	count int
}

// Probe runs the family's fault at size n times against the lock.
func (c *Cases) Probe(ctx context.Context, size float64, n int, seed uint64) (results.EnvelopePoint, error) {
	pt := results.EnvelopePoint{Size: size, Seeds: []uint64{seed}}
	if !c.Deadline.IsZero() && time.Now().Add(c.last).After(c.Deadline) {
		return pt, ErrBudget
	}
	fault, err := nemesis.Parse(c.Family.spec(size))
	if err != nil {
		return pt, err
	}
	clients := max(c.Clients, 2)
	spec, load := c.Family.load(fault, clients)
	bc := bench.Case{Backend: c.Backend, Fault: fault, Guards: c.Guards, ClientsAs: results.ClientsProcesses,
		Durability: results.DurabilityFast, Injections: n, Spec: spec}
	sub := fmt.Sprintf("%s-%02d", c.Sub, c.count)
	c.count++
	dir := filepath.Join(c.Dir, "points", sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return pt, err
	}
	r := &bench.Runner{Clusters: c.Clusters, Dir: dir, Worker: c.Worker, Seed: seed}
	var skipped error
	r.Progress = func(e bench.Event) {
		if e.Skipped != nil {
			skipped = e.Skipped
		}
	}
	start := time.Now()
	f, err := r.Run(ctx, []bench.Case{bc})
	c.last = time.Since(start)
	pt.Replay = []string{fmt.Sprintf("lockbench run --backend '%s' %s --fault '%s' "+
		"--clients %d --ttl %v --duration %v --injections %d --guard %s --seed %d --out DIR",
		c.Backend.Spec, load, fault.Spec, clients, c.Family.TTL, spec.Duration, n, guardList(c.Guards), seed)}
	if skipped != nil {
		return pt, errors.Join(skipped, err)
	}
	if err != nil {
		return pt, err
	}
	for _, rc := range f.Cases {
		if rc.History != "" {
			rc.History = filepath.ToSlash(filepath.Join("points", sub, rc.History))
			if !slices.Contains(pt.Histories, rc.History) { // the guards of a case share its history
				pt.Histories = append(pt.Histories, rc.History)
			}
		}
		c.Results = append(c.Results, rc)
		count(&pt, rc)
	}
	return pt, nil
}

// load is the workload a probe of the family's fault runs with clients
// client processes, and the flags of lockbench run that ask for it.
func (f Family) load(fault nemesis.Fault, clients int) (workloads.Spec, string) {
	hold, _ := workloads.Constant(time.Millisecond) // lockbench run's default, so that the replay is the probe
	spec := workloads.Spec{Workload: workloads.Hot, Clients: clients, TTL: f.TTL, Duration: time.Second, Hold: hold}
	flags := "--workload hot"
	if w := fault.Workload; w != "" && w != workloads.Hot {
		// A failover loses keys that were free when replication stopped:
		// on one hot key the replica keeps the last holder's (its Workload).
		spec.Workload, spec.Keys = w, manyKeys
		flags = fmt.Sprintf("--workload %s --keys %d", w, manyKeys)
	}
	if f.LongHolds {
		// Cases of two holds at least, so that a short pause still finds
		// an extension in flight to land in.
		spec.AutoExtend, spec.HoldFor, spec.Duration = true, 3*f.TTL, 6*f.TTL
		spec.AcquireTimeout = 4*spec.HoldFor + 5*time.Second // behind the other clients' holds
		flags += fmt.Sprintf(" --auto-extend --hold-left %v --acquire-timeout %v", spec.HoldFor, spec.AcquireTimeout)
	}
	return spec, flags
}

// count adds case rc (one guard's result) to the point: the injections
// and lock bugs once (they do not depend on the guard), the late writes
// per guard; only tested injections count.
func count(pt *results.EnvelopePoint, rc results.Case) {
	if rc.Invalid {
		pt.Invalid = rc.InvalidReason
	}
	var tested, bugs, late int
	for _, t := range rc.Targets {
		if !t.Counted() {
			continue
		}
		tested++
		if t.IncidentsLockBug > 0 {
			bugs++
		}
		if t.StaleAccepted > 0 {
			late++
		}
	}
	if pt.LateWrites == nil {
		pt.LateWrites = map[string]int{}
		pt.Tested, pt.Injections, pt.LockBugs = tested, rc.Injections, bugs
	}
	pt.LateWrites[rc.Guard] = late
}

func guardList(gs []judge.Guard) string {
	s := ""
	for i, g := range gs {
		if i > 0 {
			s += ","
		}
		s += string(g)
	}
	return s
}
