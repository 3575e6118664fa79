// The case list of a run: the suite's rules, then the flags that narrow or
// override them, and the guards asked for.

package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// cases builds the case list from the suite and the flags, with the fault
// classes a suite leaves out for some backends, and why.
func (f *runFlags) cases(cmd *cobra.Command) ([]bench.Case, []results.Skip, error) {
	changed := cmd.Flags().Changed
	// Zero would mean "the default" further down: say so rather than
	// run something else than asked.
	switch {
	case f.duration <= 0:
		return nil, nil, fmt.Errorf("%w: --duration %v: must be positive", bench.ErrConfig, f.duration)
	case f.ttl <= 0:
		return nil, nil, fmt.Errorf("%w: --ttl %v: must be positive", bench.ErrConfig, f.ttl)
	case f.trials < 1:
		return nil, nil, fmt.Errorf("%w: --trials %d: need at least 1", bench.ErrConfig, f.trials)
	case f.injections < 1:
		return nil, nil, fmt.Errorf("%w: --injections %d: need at least 1", bench.ErrConfig, f.injections)
	case f.keys < 1:
		return nil, nil, fmt.Errorf("%w: --keys %d: need at least 1", bench.ErrConfig, f.keys)
	case f.acquireTO <= 0:
		return nil, nil, fmt.Errorf("%w: --acquire-timeout %v: must be positive", bench.ErrConfig, f.acquireTO)
	case f.suite != "" && (changed("hold-left") || changed("auto-extend") || changed("acquire-timeout")):
		return nil, nil, fmt.Errorf("%w: --hold-left, --auto-extend and --acquire-timeout shape a matrix given by flags: a suite runs its own "+
			"lease loads", bench.ErrConfig)
	}
	hold, err := workloads.ParseDist(f.hold)
	if err != nil {
		return nil, nil, bench.ConfigError(err)
	}
	left, err := parseHoldLeft(f.holdLeft)
	if err != nil {
		return nil, nil, err
	}
	acquireTO := f.acquireTO
	if !changed("acquire-timeout") {
		acquireTO = left.acquireTimeout(acquireTO, f.clients)
	}
	think, err := workloads.ParseDist(f.think)
	if err != nil {
		return nil, nil, bench.ConfigError(err)
	}
	guards, err := f.guardList()
	if err != nil {
		return nil, nil, bench.ConfigError(err)
	}
	ws := make([]workloads.Workload, len(f.workloads))
	for i, w := range f.workloads {
		ws[i] = workloads.Workload(w)
	}
	if f.suite != "" {
		s, err := suites.Named(f.suite)
		if err != nil {
			return nil, nil, err
		}
		// Each flag given is a rule over the suite's table, or a setting
		// of its load.
		for _, o := range []struct {
			flag string
			set  func()
		}{
			{"backend", func() { s = s.Narrow(f.backends) }},
			{"fault", func() { s = s.WithFaults(f.faults) }},
			{"durability", func() { s = s.WithProfiles(f.durability) }},
			{"workload", func() { s.Workloads = ws }},
			{"guard", func() { s.Guards = guards }},
			{"fencing", func() { s.Guards = guards }},
			{"injections", func() { s.Injections = f.injections }},
			{"clients", func() { s.Clients = f.clients }},
			{"trials", func() { s.Trials = f.trials }},
			{"ttl", func() { s.TTL = f.ttl }},
			{"keys", func() { s.Keys = f.keys }},
			{"hold", func() { s.Hold = hold }},
			{"think", func() { s.Think = think }},
			{"duration", func() { s.PerfSeconds, s.FaultSeconds = f.duration.Seconds(), f.duration.Seconds() }},
		} {
			if changed(o.flag) {
				o.set()
			}
		}
		plan, err := s.Plan()
		return plan.Cases, plan.Skipped, err
	}
	names := f.backends
	if len(names) == 0 {
		names = backends.Names()
	}
	cases, err := suites.Cross(suites.Matrix{
		Backends: names, Workloads: ws, Faults: f.faults, Guards: guards, Clients: f.clients, Trials: f.trials,
		ClientsAs: f.clientsAs, Durabilities: f.durability, Injections: f.injections,
		Spec: workloads.Spec{Duration: f.duration, TTL: f.ttl, Keys: f.keys, Hold: hold, Think: think,
			HoldLeft: left.fraction, HoldFor: left.duration, AutoExtend: f.autoExtend, AcquireTimeout: acquireTO},
	})
	return cases, nil, err
}

func (f *runFlags) guardList() ([]judge.Guard, error) {
	names := f.guards
	if len(names) == 0 {
		names = []string{"none"}
	}
	if f.fencing && !slices.Contains(names, "fence") {
		names = append(slices.Clone(names), "fence")
	}
	var gs []judge.Guard
	for _, n := range names {
		g, err := judge.ParseGuard(n)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs, nil
}
