package suites

import (
	"errors"
	"fmt"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// Matrix is an explicit cross product of cases, as `lockbench run` builds
// it from its flags without a suite: every case it gives runs, and the
// runner skips, with why, those whose fault cannot apply.
type Matrix struct {
	Backends  []string
	Workloads []workloads.Workload
	Faults    []string
	// Guards are the guards every case is judged under, at once.
	Guards  []judge.Guard
	Clients []int
	Trials  int
	// ClientsAs runs the clients as processes or goroutines; empty picks
	// goroutines without a fault and processes under one.
	ClientsAs string
	// Durabilities are the servers' profiles, each case run under each
	// (fast when empty).
	Durabilities []string
	// Injections is how many times each fault case injects its fault.
	Injections int
	// Spec holds the load settings; Workload, Clients and, for the hot
	// workload, Keys are set per case.
	Spec workloads.Spec
}

// Cross expands m: every backend × workload × fault × clients × trial.
func Cross(m Matrix) ([]bench.Case, error) {
	switch m.ClientsAs {
	case "", results.ClientsProcesses, results.ClientsGoroutines:
	default:
		return nil, configErrorf("clients as %q: want %s or %s", m.ClientsAs, results.ClientsProcesses, results.ClientsGoroutines)
	}
	durabilities := m.Durabilities
	if len(durabilities) == 0 {
		durabilities = []string{results.DurabilityFast}
	}
	for _, d := range durabilities {
		if err := checkProfile(d); err != nil {
			return nil, err
		}
	}
	if len(m.Guards) == 0 {
		return nil, configErrorf("no guard: give at least one of %v", judge.Guards)
	}
	var cases []bench.Case
	for _, spec := range m.Backends {
		b, err := bench.ParseBackend(spec)
		if err != nil {
			return nil, err
		}
		for _, name := range m.Faults {
			f, err := nemesis.Parse(name)
			if err != nil {
				return nil, bench.ConfigError(err)
			}
			as := m.ClientsAs
			if as == "" {
				as = results.ClientsProcesses
				if f.Name == "none" {
					as = results.ClientsGoroutines
				}
			}
			for _, durability := range durabilities {
				for trial := range max(m.Trials, 1) {
					for _, w := range m.Workloads {
						for _, n := range m.Clients {
							s := m.Spec
							s.Workload, s.Clients = w, n
							if w == workloads.Hot {
								s.Keys = 0
							}
							cases = append(cases, bench.Case{Backend: b, Fault: f, Guards: m.Guards, Trial: trial, ClientsAs: as,
								Durability: durability, Injections: m.Injections, Spec: s})
						}
					}
				}
			}
		}
	}
	if len(cases) == 0 {
		return nil, configErrorf("no case: give at least one backend, workload, fault and client count")
	}
	if err := validate(cases); err != nil {
		return nil, err
	}
	return cases, nil
}

// validate returns the errors of the cases' specs, each once, so that bad
// settings fail before any server starts rather than skip every case.
func validate(cases []bench.Case) error {
	var errs []error
	seen := map[string]bool{}
	for _, c := range cases {
		spec, err := c.Spec.Normalize()
		if err == nil && c.Fault.Processes && c.ClientsAs != results.ClientsProcesses {
			err = configErrorf("fault %s stops client processes: run it with clients as processes", c.Fault.Spec)
		}
		if err == nil {
			spec.TTL = max(spec.TTL, c.Fault.MinTTL)
			err = c.Fault.CheckSpec(spec)
		}
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
	return bench.ConfigError(errors.Join(errs...))
}

// configErrorf returns an error wrapping bench.ErrConfig with a message
// that names the bad value.
func configErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", bench.ErrConfig, fmt.Sprintf(format, args...))
}
