package bench

import (
	"cmp"
	"slices"
	"time"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

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

// leaseCases expands the suite's lease matrix over backends bs, from the
// suite's load base.
func (s Suite) leaseCases(bs []Backend, base workloads.Spec) ([]Case, error) {
	var cases []Case
	for trial := range max(s.Trials, 1) {
		for _, l := range s.Leases {
			for _, name := range l.Faults {
				f, err := nemesis.Parse(name)
				if err != nil {
					return nil, asConfig(err)
				}
				for _, b := range bs {
					if !s.applies(f, b) {
						continue
					}
					spec := base
					spec.Workload, spec.Clients, spec.Duration = workloads.Hot, l.Clients, seconds(l.Seconds)
					spec.HoldLeft, spec.AutoExtend, spec.AcquireTimeout = l.HoldLeft, l.AutoExtend, l.AcquireTimeout
					if l.Hold != (workloads.Dist{}) {
						spec.Hold = l.Hold
					}
					guards := s.guards(f)
					if !slices.Contains(guards, judge.GuardFenceRW) {
						guards = append(slices.Clone(guards), judge.GuardFenceRW)
					}
					cases = append(cases, Case{Backend: b, Fault: f, Guards: guards, Trial: trial, ClientsAs: results.ClientsProcesses,
						Durability: results.DurabilityFast, Injections: cmp.Or(l.Injections, s.Injections), Spec: spec})
				}
			}
		}
	}
	return cases, nil
}
