package suites

import (
	"slices"

	"github.com/lockbench/lockbench/nemesis"
)

// Narrow returns the suite run on specs alone, in their order (`lockbench
// run --suite S --backend ...`): each rule keeps the backends it selects
// among specs, and a spec the suite does not run (redlock?retries=3) runs
// as the suite runs a backend as a whole (Every). A variant the table
// names (redlock?quarantine=false) keeps its own rules.
func (s Suite) Narrow(specs []string) Suite {
	s.narrow = slices.Clone(specs)
	if s.narrow == nil {
		s.narrow = []string{}
	}
	return s
}

// WithFaults returns the suite with faults as its fault matrix, in their
// order (--fault): each fault runs on the backends the suite's rules run
// its class on, under its class's profiles; a class no rule of the suite
// names runs on every backend (a rule added to that effect).
func (s Suite) WithFaults(faults []string) Suite {
	s.faults = slices.Clone(faults)
	if s.faults == nil {
		s.faults = []string{}
	}
	named := map[string]bool{}
	for _, r := range s.Rules {
		if r.Backends.zero() || r.Leave != "" {
			continue
		}
		for _, name := range r.Faults {
			named[class(name)] = true
		}
	}
	var unnamed []string
	for _, name := range faults {
		if !named[class(name)] {
			unnamed = append(unnamed, name)
		}
	}
	if len(unnamed) > 0 {
		s.Rules = append(slices.Clone(s.Rules), Rule{In: InAll, Backends: Every, Faults: unnamed})
	}
	return s
}

// WithProfiles returns the suite with every fault case run under each of
// profiles (--durability): a profile rule for every class, after the
// others.
func (s Suite) WithProfiles(profiles []string) Suite {
	s.Rules = append(slices.Clone(s.Rules), Rule{In: InAll, Profiles: slices.Clone(profiles)})
	return s
}

// class is the class of fault spec name, or name when it does not parse
// (Plan then says why).
func class(name string) string {
	f, err := nemesis.Parse(name)
	if err != nil {
		return name
	}
	return f.Class()
}
