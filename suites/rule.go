// Package suites is lockbench's case table: which backends a suite puts
// through which faults, under which durability profiles and loads, written
// as rules in one place (table.go) and read by the runner's caller
// (`lockbench run`), `lockbench run --dry-run`, `lockbench advise` and the
// docs. A suite's rules expand into bench cases, with the reason for every
// fault class a backend is not put through; the flags that narrow a suite
// (--backend, --fault, --durability) are rules too.
//
// A rule says one thing, like a roachtest test spec: "in these suites,
// these backends run these faults", "in these suites, these faults run
// under these profiles", or "in these suites, these backends leave these
// faults out, for this reason". Whether a fault can apply to a backend at
// all is not the table's to say: every such question goes through one
// function (applicability), which asks the backend and the nemesis.
package suites

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
)

// Set is a set of the predefined suites a rule belongs to.
type Set uint8

// The predefined suites.
const (
	// InDefault is `make bench` (lockbench run --suite default).
	InDefault Set = 1 << iota
	// InQuick is `make bench-quick`, a smoke run of a few minutes.
	InQuick
	// InFull is `make bench-full`: every profile, size and backend.
	InFull
	// InAll is every predefined suite.
	InAll = InDefault | InQuick | InFull
)

// names are the suites' names, by bit, as --suite takes them.
var names = []struct {
	set  Set
	name string
}{{InDefault, "default"}, {InQuick, "quick"}, {InFull, "full"}}

// Names returns the predefined suites' names, as --suite takes them.
func Names() []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n.name
	}
	return out
}

// String names the suites of the set: "default,full".
func (s Set) String() string {
	var out []string
	for _, n := range names {
		if s&n.set != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ",")
}

// Sweep is the pseudo-fault a rule names for the fault-free performance
// sweep (clients as goroutines, each workload at each client count), as
// opposed to "none", the fault-free baseline of the fault matrix (clients
// as processes, judged like a fault case).
const Sweep = "sweep"

// Rule is one line of the case table. Its kind follows from its fields:
//
//   - Backends set, Leave empty: in suites In, the backends run Faults
//     (fault specs as on the command line, or Sweep), each under the
//     profiles its class has (fast unless a profile rule says otherwise).
//   - Backends set, Leave set: in suites In, the backends leave Faults'
//     classes out although they apply, and the results say so, with Leave
//     completing the sentence "the SUITE suite leaves CLASS on BACKEND ...".
//   - Backends empty, Profiles set: in suites In, Faults' classes (every
//     class, when Faults is empty) run under Profiles wherever they run; a
//     later profile rule overrides an earlier one.
//
// A rule never says whether a fault can apply to a backend: the backend
// and the nemesis do (applicability).
type Rule struct {
	// In are the predefined suites that hold the rule; a Suite built by
	// hand (advise) takes every rule it is given, whatever In says.
	In Set
	// Backends selects the backend specs the rule is about.
	Backends Backends
	// Faults are fault specs (client-pause?x=0.5) or Sweep.
	Faults []string
	// Profiles are durability profiles (results.DurabilityFast, ...).
	Profiles []string
	// Leave, when set, is why the rule's backends leave its faults out.
	Leave string
}

// Backends selects backend specs for a rule: Every backend the suite runs
// as a whole (each registered backend by its plain name, or the modes the
// table runs it as), named Specs, or those of Every whose servers are of
// Kinds. The fields add up.
type Backends struct {
	Every bool
	Specs []string
	Kinds []backends.Kind
}

// Every selects every backend the suite runs as a whole.
var Every = Backends{Every: true}

// Specs selects the backends named, as written on the command line.
func Specs(specs ...string) Backends { return Backends{Specs: specs} }

// Kinds selects the backends of Every whose servers are of the kinds
// given.
func Kinds(kinds ...backends.Kind) Backends { return Backends{Kinds: kinds} }

// zero reports whether b selects nothing.
func (b Backends) zero() bool { return !b.Every && len(b.Specs) == 0 && len(b.Kinds) == 0 }

// resolve returns the specs b selects, given every, what Every stands for
// in the suite, and narrow, the specs a suite was narrowed to (nil: not
// narrowed).
func (b Backends) resolve(every, narrow []string) ([]string, error) {
	var out []string
	add := func(spec string) {
		if !slices.Contains(out, spec) {
			out = append(out, spec)
		}
	}
	if b.Every {
		for _, spec := range every {
			add(spec)
		}
	}
	for _, spec := range b.Specs {
		if narrow == nil || slices.Contains(narrow, spec) {
			add(spec)
		}
	}
	if len(b.Kinds) > 0 {
		for _, spec := range every {
			be, err := bench.ParseBackend(spec)
			if err != nil {
				return nil, err
			}
			if slices.Contains(b.Kinds, be.Descriptor.Servers.Kind) {
				add(spec)
			}
		}
	}
	return out, nil
}

// check returns an error naming what is wrong with rule r, at index i.
func (r Rule) check(i int) error {
	switch {
	case r.Backends.zero() && r.Leave != "":
		return fmt.Errorf("%w: rule %d leaves %v out on no backend", bench.ErrConfig, i, r.Faults)
	case r.Backends.zero() && len(r.Profiles) == 0:
		return fmt.Errorf("%w: rule %d selects no backend and sets no profile", bench.ErrConfig, i)
	case !r.Backends.zero() && len(r.Profiles) > 0:
		return fmt.Errorf("%w: rule %d both selects backends and sets profiles %v: profiles are a rule of their own", bench.ErrConfig, i,
			r.Profiles)
	case !r.Backends.zero() && len(r.Faults) == 0:
		return fmt.Errorf("%w: rule %d selects backends for no fault", bench.ErrConfig, i)
	}
	return nil
}
