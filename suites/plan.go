package suites

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// Plan is what a suite expands into: the cases to run, in order, and,
// for every fault class of the suite a backend is not put through, why
// (results.File.Skipped: the report then says "not judged" with the
// reason).
type Plan struct {
	Cases   []bench.Case
	Skipped []results.Skip
}

// applicability returns why fault f cannot apply to backend b, or "" when
// it can: its servers lack a capability the fault requires, and the
// reason is the lacking kind's or mechanism's own. Every question of the
// table about applicability goes through it, so that how it is answered
// changes in one place.
func applicability(b bench.Backend, f nemesis.Fault) string {
	if err := f.Fits(bench.Shape(b)); err != nil {
		if na, ok := errors.AsType[*nemesis.Inapplicable](err); ok {
			return na.Reason
		}
		return err.Error()
	}
	return ""
}

// resolved is a suite's rules resolved to backend specs and fault classes.
type resolved struct {
	backends []bench.Backend            // in the order cases run them
	variant  map[string]bool            // specs that Every does not stand for
	runs     map[string]map[string]bool // spec → class (or Sweep) → run
	left     map[string]map[string]string
	faults   []nemesis.Fault     // the fault matrix, in order
	profiles map[string][]string // class → profiles
	order    map[string][]string // spec → classes, as rules name them
}

// Plan expands the suite: the performance sweep, the fault matrix and the
// lease matrix, leaving out the faults a rule leaves out and those that
// cannot apply to a backend (applicability), and says why for each.
func (s Suite) Plan() (Plan, error) {
	r, err := s.resolve()
	if err != nil {
		return Plan{}, err
	}
	none, err := nemesis.Parse("none")
	if err != nil {
		return Plan{}, bench.ConfigError(err)
	}
	base := workloads.Spec{TTL: s.TTL, Hold: s.Hold, Think: s.Think}
	var cases []bench.Case
	for trial := range max(s.PerfTrials, 1) {
		for _, w := range s.Workloads {
			if w == workloads.Hot && s.HotTrials > 0 && trial >= s.HotTrials {
				continue
			}
			clients := s.Clients
			if w != workloads.Hot && len(s.ManyKeysClients) > 0 {
				clients = s.ManyKeysClients
			}
			for _, n := range clients {
				for _, b := range r.backends {
					if !r.run(b.Spec, Sweep) {
						continue
					}
					spec := base
					spec.Workload, spec.Clients, spec.Duration = w, n, seconds(s.PerfSeconds)
					if w != workloads.Hot {
						spec.Keys = s.Keys
					}
					cases = append(cases, bench.Case{Backend: b, Fault: none, Guards: []judge.Guard{judge.GuardNone}, Trial: trial,
						ClientsAs: results.ClientsGoroutines, Durability: results.DurabilityFast, Spec: spec})
				}
			}
		}
	}
	for _, f := range r.faults {
		profiles := r.profiles[f.Class()]
		if len(profiles) == 0 {
			profiles = []string{results.DurabilityFast}
		}
		for trial := range max(s.Trials, 1) {
			for _, durability := range profiles {
				for _, b := range r.backends {
					if !r.run(b.Spec, f.Class()) || applicability(b, f) != "" || bench.ProfileFits(b, durability) != "" {
						continue
					}
					spec := base
					spec.Workload, spec.Clients, spec.Duration = workloads.Hot, s.FaultClients, seconds(s.FaultSeconds)
					if f.Workload != "" && f.Workload != workloads.Hot {
						spec.Workload, spec.Keys = f.Workload, s.Keys
					}
					cases = append(cases, bench.Case{Backend: b, Fault: f, Guards: s.guards(f), Trial: trial,
						ClientsAs: results.ClientsProcesses, Durability: durability, Injections: s.Injections, Spec: spec})
				}
			}
		}
	}
	leases, err := s.leaseCases(r, base)
	if err != nil {
		return Plan{}, err
	}
	cases = append(cases, leases...)
	if len(cases) == 0 {
		return Plan{}, fmt.Errorf("%w: the suite has no case: give at least one backend, and clients or faults", bench.ErrConfig)
	}
	if err := validate(cases); err != nil {
		return Plan{}, err
	}
	return Plan{Cases: cases, Skipped: s.skipped(r)}, nil
}

// run reports whether the suite's rules put spec through class.
func (r resolved) run(spec, class string) bool {
	_, left := r.left[spec][class]
	return r.runs[spec][class] && !left
}

// leaseCases expands the suite's lease matrix: each load under each of
// its faults on every backend the suite runs the fault's class on.
func (s Suite) leaseCases(r resolved, base workloads.Spec) ([]bench.Case, error) {
	var cases []bench.Case
	for trial := range max(s.Trials, 1) {
		for _, l := range s.Leases {
			for _, name := range l.Faults {
				f, err := nemesis.Parse(name)
				if err != nil {
					return nil, bench.ConfigError(err)
				}
				for _, b := range r.backends {
					if !r.run(b.Spec, f.Class()) || applicability(b, f) != "" {
						continue
					}
					spec := base
					spec.Workload, spec.Clients, spec.Duration = workloads.Hot, l.Clients, seconds(l.Seconds)
					spec.HoldLeft, spec.HoldFor, spec.AutoExtend, spec.AcquireTimeout = l.HoldLeft, l.HoldFor, l.AutoExtend, l.AcquireTimeout
					if l.Hold != (workloads.Dist{}) {
						spec.Hold = l.Hold
					}
					guards := s.guards(f)
					if !slices.Contains(guards, judge.GuardFenceRW) {
						guards = append(slices.Clone(guards), judge.GuardFenceRW)
					}
					cases = append(cases, bench.Case{Backend: b, Fault: f, Guards: guards, Trial: trial, ClientsAs: results.ClientsProcesses,
						Durability: results.DurabilityFast, Injections: cmp.Or(l.Injections, s.Injections), Spec: spec})
				}
			}
		}
	}
	return cases, nil
}

// skipped lists the fault classes of the suite that a backend is not put
// through, each with why: a rule leaves it out, the suite runs the class
// on other backends only, or it cannot apply (applicability).
func (s Suite) skipped(r resolved) []results.Skip {
	var out []results.Skip
	seen := map[[2]string]bool{}
	for _, b := range r.backends {
		for _, f := range r.faults {
			class := f.Class()
			if seen[[2]string{b.Spec, class}] {
				continue
			}
			reason := ""
			leave, left := r.left[b.Spec][class]
			switch {
			case left:
				reason = s.leaves(class, b.Spec, leave)
			case !r.runs[b.Spec][class] && r.variant[b.Spec]:
				reason = fmt.Sprintf("the suite runs the variant %s under %v only", b.Spec, r.order[b.Spec])
			case !r.runs[b.Spec][class]:
				var on []string
				for _, o := range r.backends {
					if r.run(o.Spec, class) {
						on = append(on, o.Spec)
					}
				}
				reason = fmt.Sprintf("the %s suite runs %s on %v only (the full suite on every backend)", s.Name, class, on)
			default:
				reason = applicability(b, f)
			}
			if reason != "" {
				seen[[2]string{b.Spec, class}] = true
				out = append(out, results.Skip{Backend: b.Spec, FaultClass: class, Reason: reason})
			}
		}
		// A class the suite leaves out everywhere is in no fault of its
		// matrix: each backend still says so.
		for _, class := range slices.Sorted(maps.Keys(r.left[b.Spec])) {
			if seen[[2]string{b.Spec, class}] {
				continue
			}
			seen[[2]string{b.Spec, class}] = true
			reason := s.leaves(class, b.Spec, r.left[b.Spec][class])
			if f, err := nemesis.Parse(class); err == nil {
				if why := applicability(b, f); why != "" {
					reason = why // it could not have run here anyway
				}
			}
			out = append(out, results.Skip{Backend: b.Spec, FaultClass: class, Reason: reason})
		}
	}
	return out
}

// leaves says that the suite leaves class on spec out, and why.
func (s Suite) leaves(class, spec, why string) string {
	return fmt.Sprintf("the %s suite leaves %s on %s %s", s.Name, class, spec, why)
}

// guards are the guards the suite judges fault f under: a client's stop
// (a pause, or one its clock misses) under the pause guards too.
func (s Suite) guards(f nemesis.Fault) []judge.Guard {
	if c := f.Class(); c == "client-pause" || c == "client-clock" {
		return append(slices.Clone(s.Guards), s.PauseGuards...)
	}
	return s.Guards
}

// everySpec returns what Every stands for in the suite: each registered
// backend by its plain name, or the specs the table runs it as; in a
// suite narrowed to specs, those of them Every stands for, and those no
// rule of the suite names.
func (s Suite) everySpec() []string {
	var all []string
	for _, d := range backends.Descriptors() {
		if specs, ok := every[d.Name]; ok {
			all = append(all, specs...)
		} else {
			all = append(all, d.Name)
		}
	}
	if s.narrow == nil {
		return all
	}
	named := map[string]bool{}
	for _, r := range s.Rules {
		for _, spec := range r.Backends.Specs {
			named[spec] = true
		}
	}
	var out []string
	for _, spec := range s.narrow {
		if slices.Contains(all, spec) || !named[spec] {
			out = append(out, spec)
		}
	}
	return out
}

// resolve resolves the suite's rules.
func (s Suite) resolve() (resolved, error) {
	r := resolved{variant: map[string]bool{}, runs: map[string]map[string]bool{}, left: map[string]map[string]string{},
		profiles: map[string][]string{}, order: map[string][]string{}}
	every := s.everySpec()
	var specs, order []string // every spec and fault spec, as the rules first name them
	type profileRule struct{ classes, profiles []string }
	var profileRules []profileRule
	for i, rule := range s.Rules {
		if err := rule.check(i); err != nil {
			return r, err
		}
		var classes []string
		for _, name := range rule.Faults {
			if name == Sweep {
				classes = append(classes, Sweep)
				continue
			}
			f, err := nemesis.Parse(name)
			if err != nil {
				return r, bench.ConfigError(err)
			}
			classes = append(classes, f.Class())
			if rule.Leave == "" && !rule.Backends.zero() && !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
		if rule.Backends.zero() { // a profile rule
			for _, p := range rule.Profiles {
				if err := checkProfile(p); err != nil {
					return r, err
				}
			}
			profileRules = append(profileRules, profileRule{classes, rule.Profiles})
			continue
		}
		sel, err := rule.Backends.resolve(every, s.narrow)
		if err != nil {
			return r, err
		}
		for _, spec := range sel {
			if rule.Leave != "" {
				if r.left[spec] == nil {
					r.left[spec] = map[string]string{}
				}
				for _, c := range classes {
					r.left[spec][c] = rule.Leave
				}
				continue
			}
			if !slices.Contains(specs, spec) {
				specs = append(specs, spec)
			}
			if r.runs[spec] == nil {
				r.runs[spec] = map[string]bool{}
			}
			for _, c := range classes {
				if !r.runs[spec][c] && c != Sweep {
					r.order[spec] = append(r.order[spec], c)
				}
				r.runs[spec][c] = true
			}
		}
	}
	if s.faults != nil {
		order = s.faults
	}
	for _, name := range order {
		f, err := nemesis.Parse(name)
		if err != nil {
			return r, bench.ConfigError(err)
		}
		r.faults = append(r.faults, f)
		// The last profile rule that names the class, or every class.
		for _, p := range slices.Backward(profileRules) {
			if len(p.classes) == 0 || slices.Contains(p.classes, f.Class()) {
				r.profiles[f.Class()] = p.profiles
				break
			}
		}
	}
	for _, spec := range specs {
		b, err := bench.ParseBackend(spec)
		if err != nil {
			return r, err
		}
		r.backends = append(r.backends, b)
		r.variant[spec] = !slices.Contains(every, spec)
	}
	if s.narrow == nil {
		slices.SortStableFunc(r.backends, registryOrder)
	} else {
		slices.SortStableFunc(r.backends, func(a, b bench.Backend) int {
			return cmp.Compare(slices.Index(s.narrow, a.Spec), slices.Index(s.narrow, b.Spec))
		})
	}
	return r, nil
}

// registryOrder orders backends as the registry lists them: by name, and
// a backend's specs as its descriptor lists its variants (the plain
// backend first, specs it does not list last).
func registryOrder(a, b bench.Backend) int {
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(variantIndex(a), variantIndex(b))
}

// variantIndex is b's place among its descriptor's variants.
func variantIndex(b bench.Backend) int {
	if b.Spec == b.Name {
		return -1
	}
	for i, v := range b.Descriptor.AllVariants() {
		if v.Spec(b.Name) == b.Spec {
			return i
		}
	}
	return len(b.Descriptor.AllVariants())
}

// checkProfile returns an error naming a durability profile that is not
// one.
func checkProfile(p string) error {
	switch p {
	case results.DurabilityFast, results.DurabilityPeriodic, results.DurabilityDurable:
		return nil
	}
	return fmt.Errorf("%w: durability %q: want %s, %s or %s", bench.ErrConfig, p, results.DurabilityFast, results.DurabilityPeriodic,
		results.DurabilityDurable)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
