package bench

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockbench/lockbench/workloads"
	"github.com/lockbench/lockbench/workloads/nemesis"
)

// Suite describes a run as two matrices: a performance sweep (every
// backend, no fault, each workload at each client count) and a fault
// matrix (each fault against the backends it applies to, with and
// without fencing where fencing changes the outcome, over several
// trials). Cases returns the list.
type Suite struct {
	Backends []string

	// The performance sweep.
	Workloads   []workloads.Workload
	Clients     []int
	PerfSeconds float64

	// The fault matrix, on the hot key (or on the workload a fault
	// needs). Trials repeats the faults where
	// fencing matters (FencedFaults), whose violations are rare events
	// to count; the availability faults run once.
	Faults       []string
	FaultClients int
	FaultSeconds float64
	Trials       int
	// Guards are the resource guards of the fault cases. Under the faults
	// where fencing changes what the resource accepts (FencedFaults) every
	// guard runs; under the others only the last one does (fencing on by
	// default: it changes nothing there but is what a correctness
	// recommendation needs evidence of).
	Guards []workloads.Guard
	// Variants lists, for a backend spec with params (a variant such as
	// redlock?quarantine=false), the faults it runs ("none" for the
	// performance sweep); a plain backend runs every fault it supports.
	Variants map[string][]string

	// The load.
	TTL   time.Duration
	Keys  int
	Hold  workloads.Dist
	Think workloads.Dist
}

// FencedFaults are the faults under which a holder's write can be stale,
// so that a fencing guard changes what the resource accepts.
var FencedFaults = []string{"client-pause", "failover", "restart", "clock-jump"}

// Default is `make bench`: every backend, a client sweep of 1, 4, 16 and
// 64 on a hot key and on 100 keys, and the fault catalogue, within about
// 12 minutes on 2 cores.
func Default() Suite {
	hold, _ := workloads.Constant(time.Millisecond)
	return Suite{
		Backends: []string{"noop", "redis", "sentinel", "sentinel?wait=1", "redlock", "redlock?quarantine=false", "redlock?clockfloor=false", "redsync", "zookeeper", "etcd",
			"postgres?mode=advisory", "postgres?mode=lease", "rueidislock"},
		Workloads:    []workloads.Workload{workloads.Hot, workloads.UniformKeys},
		Clients:      []int{1, 4, 16, 64},
		PerfSeconds:  1.5,
		Faults:       nemesis.Names()[1:],
		FaultClients: 8,
		FaultSeconds: 5,
		Trials:       2,
		Guards:       []workloads.Guard{workloads.GuardNone, workloads.GuardFence},
		// The variants are there for the restart case: without the
		// quarantine (double grants), and with plain counters for tokens
		// (which nodes restarted empty forget).
		// And WAIT is there for the failover: what it buys.
		// rueidislock is a comparison: its speed, and the faults of the
		// debate that it meets on one Redis (the clock jump is left out
		// to keep the suite within its time).
		Variants: map[string][]string{
			"sentinel?wait=1":          {"failover"},
			"redlock?quarantine=false": {"restart"},
			"redlock?clockfloor=false": {"restart", "client-pause"},
			"rueidislock":              {"none", "client-pause", "restart"},
		},
		TTL:  time.Second,
		Keys: 100,
		Hold: hold,
	}
}

// Quick is `make bench-quick`: a smoke run of a few minutes.
func Quick() Suite {
	s := Default()
	s.Backends = []string{"noop", "redis", "redlock", "redlock?quarantine=false", "redsync", "etcd",
		"postgres?mode=advisory", "postgres?mode=lease", "rueidislock"}
	s.Clients = []int{1, 16}
	s.PerfSeconds = 1
	s.Faults = []string{"client-pause", "restart", "crash-minority"}
	s.FaultClients = 4
	s.FaultSeconds = 4
	s.Trials = 1
	s.Variants = map[string][]string{
		"redlock?quarantine=false": {"restart"},
		// Speed only: the quick run has no time for their faults.
		"postgres?mode=advisory": {"none"},
		"postgres?mode=lease":    {"none"},
		"rueidislock":            {"none"},
	}
	return s
}

// Cases expands the suite, leaving out the faults a backend's cluster
// cannot have (partitioning a single Redis, a failover without Sentinel).
func (s Suite) Cases() ([]Case, error) {
	var bs []Backend
	for _, spec := range s.Backends {
		b, err := ParseBackend(spec)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	none, err := nemesis.Lookup("none")
	if err != nil {
		return nil, err
	}
	base := workloads.Spec{TTL: s.TTL, Hold: s.Hold, Think: s.Think}
	var cases []Case
	for _, w := range s.Workloads {
		for _, n := range s.Clients {
			for _, b := range bs {
				if !s.runs("none", b) {
					continue
				}
				spec := base
				spec.Workload, spec.Clients, spec.Duration = w, n, seconds(s.PerfSeconds)
				if w != workloads.Hot {
					spec.Keys = s.Keys
				}
				cases = append(cases, Case{Backend: b, Fault: none, Guard: workloads.GuardNone, Spec: spec})
			}
		}
	}
	for _, name := range s.Faults {
		f, err := nemesis.Lookup(name)
		if err != nil {
			return nil, err
		}
		if f.Name == "none" {
			continue
		}
		trials := 1
		if slices.Contains(FencedFaults, f.Name) {
			trials = max(s.Trials, 1)
		}
		for trial := range trials {
			for _, b := range bs {
				if !s.runs(f.Name, b) {
					continue
				}
				if sh, ok := shape(b); ok && f.Fits(sh) != nil {
					continue
				}
				for i, g := range s.Guards {
					if !slices.Contains(FencedFaults, f.Name) && i != len(s.Guards)-1 {
						continue
					}
					spec := base
					spec.Workload, spec.Clients, spec.Duration = workloads.Hot, s.FaultClients, seconds(s.FaultSeconds)
					if f.Workload != "" && f.Workload != workloads.Hot {
						spec.Workload, spec.Keys = f.Workload, s.Keys
					}
					cases = append(cases, Case{Backend: b, Fault: f, Guard: g, Trial: trial, Spec: spec})
				}
			}
		}
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("the suite has no case: give at least one backend, and clients or faults")
	}
	if err := validate(cases); err != nil {
		return nil, err
	}
	return cases, nil
}

// validate returns the errors of the cases' specs, each once, so that bad
// settings fail before any server starts rather than skip every case.
func validate(cases []Case) error {
	var errs []error
	seen := map[string]bool{}
	for _, c := range cases {
		err := c.Spec.Validate()
		if err == nil {
			continue
		}
		each := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			each = j.Unwrap()
		}
		for _, e := range each {
			if !seen[e.Error()] {
				seen[e.Error()] = true
				errs = append(errs, e)
			}
		}
	}
	return errors.Join(errs...)
}

// runs reports whether fault f runs on backend b (see Variants).
func (s Suite) runs(f string, b Backend) bool {
	faults, variant := s.Variants[b.Spec]
	return !variant || slices.Contains(faults, f)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Matrix is an explicit cross product of cases, as `lockbench run` builds
// it from its flags.
type Matrix struct {
	Backends  []string
	Workloads []workloads.Workload
	Faults    []string
	Guards    []workloads.Guard
	Clients   []int
	Trials    int
	// Spec holds the load settings; Workload, Clients and, for the hot
	// workload, Keys are set per case.
	Spec workloads.Spec
}

// Cross expands m: every backend × workload × fault × guard × clients ×
// trial.
func Cross(m Matrix) ([]Case, error) {
	var cases []Case
	for _, spec := range m.Backends {
		b, err := ParseBackend(spec)
		if err != nil {
			return nil, err
		}
		for _, name := range m.Faults {
			f, err := nemesis.Lookup(name)
			if err != nil {
				return nil, err
			}
			for trial := range max(m.Trials, 1) {
				for _, w := range m.Workloads {
					for _, g := range m.Guards {
						for _, n := range m.Clients {
							s := m.Spec
							s.Workload, s.Clients = w, n
							if w == workloads.Hot {
								s.Keys = 0
							}
							cases = append(cases, Case{Backend: b, Fault: f, Guard: g, Trial: trial, Spec: s})
						}
					}
				}
			}
		}
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("no case: give at least one backend, workload, fault, guard and client count")
	}
	if err := validate(cases); err != nil {
		return nil, err
	}
	return cases, nil
}
