package bench

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// Suite describes a run as two matrices: a performance sweep (every
// backend, no fault, each workload at each client count, over several
// trials, clients as goroutines) and a fault matrix (each fault against
// the backends it applies to, clients as worker processes, the fault
// injected several times per case, the resource judged under every guard
// at once, over several trials). Cases returns the list.
type Suite struct {
	// Name names the suite in results.json ("default", "quick").
	Name     string
	Backends []string

	// The performance sweep: Clients on the hot key, ManyKeysClients on
	// the workloads of many keys (Clients when empty).
	Workloads       []workloads.Workload
	Clients         []int
	ManyKeysClients []int
	PerfSeconds     float64
	PerfTrials      int

	// The fault matrix, on the hot key (or on the workload a fault
	// needs). Faults are written as on the command line, with params
	// (client-pause?x=3); "none" is the fault-free baseline with clients
	// as processes.
	Faults       []string
	FaultClients int
	FaultSeconds float64
	Trials       int
	// Injections is how many times each fault case injects its fault.
	Injections int
	// Guards are the resource guards every fault case is judged under;
	// PauseGuards are added under client-pause.
	Guards      []judge.Guard
	PauseGuards []judge.Guard
	// Profiles lists, by fault class, the durability profiles its cases
	// run under (results.DurabilityFast, DurabilityPeriodic,
	// DurabilityDurable); a class not listed runs under fast only. A
	// server without a profile (ZooKeeper and etcd have no periodic one)
	// skips it.
	Profiles map[string][]string
	// Only lists, by fault class, the backend specs the suite puts
	// through it; a class not listed runs on every backend it applies to.
	// (The default suite runs a power loss on the Redis-based locks only,
	// where the Redlock spec's claims about fsync live; the full suite on
	// every backend.)
	Only map[string][]string
	// Variants lists, for a backend spec with params (a variant such as
	// redlock?quarantine=false), the fault classes it runs ("none" for
	// the performance sweep); a plain backend runs every fault it
	// supports.
	Variants map[string][]string
	// Deferred lists, by backend spec, the fault classes that apply to it
	// but that the suite leaves to the full suite (its variant's
	// Deferred): the default suite's time budget.
	Deferred map[string][]string

	// Leases is the lease matrix: loads that provoke a lease's
	// accounting, each under its faults on every backend (LeaseLoad).
	Leases []LeaseLoad

	// The load.
	TTL   time.Duration
	Keys  int
	Hold  workloads.Dist
	Think workloads.Dist
}

// Default is `make bench`: every backend (the variants its descriptor
// runs in this suite), a client sweep on a hot key and on 100 keys, and
// the fault catalogue, within about 15 minutes on 2 cores. Within that
// budget a fault runs under the fast profile only, but for a power loss
// of a majority of the Redis nodes under periodic and durable, the
// profiles whose promises it tests (fast keeps nothing, by design), and
// one size of clock jump; Full runs every profile, size and backend.
func Default() Suite {
	hold, _ := workloads.Constant(time.Millisecond)
	bs, variants := suiteBackends(backends.DefaultSuite)
	return Suite{
		Name:      "default",
		Backends:  bs,
		Workloads: []workloads.Workload{workloads.Hot, workloads.UniformKeys},
		// One client, and 16 on one key (which already queue, each waiting
		// for the other 15); 16 and 64 on 100 keys, where the locks' own
		// speed shows. (64 clients on one key make a history whose
		// linearizability check does not finish.)
		Clients:         []int{1, 16},
		ManyKeysClients: []int{16, 64},
		PerfSeconds:     0.5,
		PerfTrials:      3,
		// A pause of 1.5 leases after the read, which no lock without
		// fencing should survive (Full adds one of half a lease, which
		// every lease-based lock should, and pauses at every other point
		// of the client's cycle).
		//
		// The faults whose servers need something of their own (network
		// namespaces, the clock preload, a lazy filesystem) come last,
		// grouped, so that the servers are restarted for them once.
		Faults: []string{"none", "client-pause", "server-pause", "failover", "restart",
			"crash-minority", "latency", "partition-leader", "partition-halves", "leader-kill",
			"partition", "clock-jump", "power-loss"},
		FaultClients: 6,
		FaultSeconds: 5,
		Trials:       1,
		Injections:   3,
		Guards:       []judge.Guard{judge.GuardNone, judge.GuardFence},
		PauseGuards:  []judge.Guard{judge.GuardCAS},
		Profiles:     map[string][]string{"power-loss": {results.DurabilityPeriodic, results.DurabilityDurable}},
		// A majority's restart where it can cost a lock its keys (Redis
		// without persistence, the PostgreSQL server's advisory locks, a
		// Sentinel set); ZooKeeper and etcd face it in the full suite
		// (their minority's crash and leader's loss are here).
		Only: map[string][]string{
			"power-loss": showcased(bs, "power-loss"),
			"restart":    ofKinds(bs, variants, "restart", backends.Redis, backends.Sentinel, backends.Postgres),
		},
		Variants: variants,
		Deferred: deferred(bs),
		// Lease accounting, which millisecond holds never provoke: leases
		// that extend themselves while their holders hold several TTLs,
		// and a pause that strikes inside an extension (Full adds holders
		// that hold up to all the validity their lease has left, and more
		// faults).
		Leases: []LeaseLoad{
			autoExtendLoad(time.Second, 5, 2, "client-pause?at=extend"),
		},
		TTL:  time.Second,
		Keys: 100,
		Hold: hold,
	}
}

// showcased returns the specs among specs whose variant lists fault class
// f in its Showcase: where the default suite runs a costly class (the
// full suite runs it on every backend it applies to).
func showcased(specs []string, f string) []string {
	var out []string
	for _, spec := range specs {
		b, err := ParseBackend(spec)
		if err != nil {
			continue
		}
		for _, v := range b.Descriptor.AllVariants() {
			if v.Spec(b.Name) == spec && slices.Contains(v.Showcase, f) {
				out = append(out, spec)
				break
			}
		}
	}
	return out
}

// deferred returns, for the specs among specs whose variant defers fault
// classes to the full suite (backends.Variant.Deferred), those classes.
func deferred(specs []string) map[string][]string {
	out := map[string][]string{}
	for _, spec := range specs {
		b, err := ParseBackend(spec)
		if err != nil {
			continue
		}
		for _, v := range b.Descriptor.AllVariants() {
			if v.Spec(b.Name) == spec && len(v.Deferred) > 0 {
				out[spec] = v.Deferred
			}
		}
	}
	return out
}

// ofKinds returns the specs among specs whose servers are of the kinds
// given (backends.Redis: redis, redlock, redsync, rueidislock and their
// variants) and that run fault class f (a variant limited to other
// classes does not, see Suite.Variants).
func ofKinds(specs []string, variants map[string][]string, f string, kinds ...backends.Kind) []string {
	var out []string
	for _, spec := range specs {
		b, err := ParseBackend(spec)
		if err != nil || !slices.Contains(kinds, b.Descriptor.Servers.Kind) {
			continue
		}
		if only, ok := variants[spec]; !ok || slices.Contains(only, f) {
			out = append(out, spec)
		}
	}
	return out
}

// Quick is `make bench-quick`: a smoke run of a few minutes over every
// backend.
func Quick() Suite {
	s := Default()
	s.Name = "quick"
	s.Backends, s.Variants = suiteBackends(backends.QuickSuite)
	s.Deferred = deferred(s.Backends)
	s.Workloads = []workloads.Workload{workloads.Hot}
	s.Clients = []int{1, 16}
	s.ManyKeysClients = nil
	s.PerfSeconds = 0.5
	s.PerfTrials = 1
	s.Faults = []string{"client-pause", "restart", "crash-minority"}
	s.FaultClients = 4
	s.FaultSeconds = 4
	s.Injections = 2
	s.Profiles = nil
	// A smoke run: a majority's restart on the Redis-based locks only.
	s.Only = map[string][]string{"restart": ofKinds(s.Backends, s.Variants, "restart", backends.Redis)}
	s.Leases = nil
	return s
}

// Full is `make bench-full`: the default suite, with a client pause at
// every point of the client's cycle in the fault matrix, every durability
// profile under every fault that may cost servers their data (a restart,
// a crash, a power loss, a minority's crash) on every backend, both sizes
// of clock jump and a clock that runs fast, and the lease matrix under
// more faults: about three times as long as the default (412 cases,
// about 39 minutes of planned load against its 12).
func Full() Suite {
	s := Default()
	s.Name = "full"
	s.Backends, s.Variants = suiteBackends(backends.DefaultSuite | backends.FullSuite)
	s.Faults = []string{"none", "client-pause", "client-pause?x=0.5", "client-pause?at=before-read", "client-pause?at=after-write", "client-pause?at=acquire",
		"server-pause", "failover", "restart", "crash", "crash-minority", "latency", "partition-leader", "partition-halves", "leader-kill",
		"partition", "clock-jump?by=0.5&nodes=minority", "clock-jump", "clock-rate", "power-loss"}
	all := []string{results.DurabilityFast, results.DurabilityPeriodic, results.DurabilityDurable}
	s.Profiles = map[string][]string{"restart": all, "crash": all, "power-loss": all, "crash-minority": all}
	s.Only, s.Deferred = nil, nil
	s.Leases = []LeaseLoad{
		validityLoad(4, "none", "client-pause?at=acquire", "client-pause?at=after-write"),
		autoExtendLoad(s.TTL, 8, 0, "none", "client-pause?at=extend", "client-pause?at=extend&x=0.5", "server-pause", "partition"),
	}
	return s
}

// validityLoad is the lease matrix's load whose holders hold a random
// fraction, up to all, of the validity their lease has left, for seconds
// under each of faults.
func validityLoad(seconds float64, faults ...string) LeaseLoad {
	return LeaseLoad{HoldLeft: 1, Clients: 4, Seconds: seconds, Faults: faults}
}

// autoExtendLoad is the lease matrix's load whose leases (of TTL ttl)
// extend themselves while their holders hold two to three TTLs, for
// seconds under each of faults, injected injections times (the suite's
// when 0): three clients on one key, so that one is waiting when a lease
// lapses.
func autoExtendLoad(ttl time.Duration, seconds float64, injections int, faults ...string) LeaseLoad {
	hold, _ := workloads.Uniform(2*ttl, 3*ttl)
	return LeaseLoad{AutoExtend: true, Hold: hold, AcquireTimeout: 10 * ttl, Clients: 3, Seconds: seconds, Injections: injections, Faults: faults}
}

// suiteBackends returns the backend specs a predefined suite runs, in the
// order of the backends' names, each backend's in the order of its
// descriptor's variants, and the fault classes of the variants that run
// under some only.
func suiteBackends(suite backends.Suites) ([]string, map[string][]string) {
	var specs []string
	only := map[string][]string{}
	for _, d := range backends.Descriptors() {
		for _, v := range d.AllVariants() {
			if v.Suites&suite == 0 {
				continue
			}
			spec := v.Spec(d.Name)
			specs = append(specs, spec)
			if len(v.Faults) > 0 {
				only[spec] = v.Faults
			}
		}
	}
	return specs, only
}

// Cases expands the suite, leaving out the faults that cannot apply to a
// backend (its descriptor says why: partitioning a single Redis, a
// failover without Sentinel) or to its servers here (a fault between
// quorum members, without network namespaces to cut them apart).
func (s Suite) Cases() ([]Case, error) {
	var bs []Backend
	for _, spec := range s.Backends {
		b, err := ParseBackend(spec)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	none, err := nemesis.Parse("none")
	if err != nil {
		return nil, asConfig(err)
	}
	base := workloads.Spec{TTL: s.TTL, Hold: s.Hold, Think: s.Think}
	var cases []Case
	for trial := range max(s.PerfTrials, 1) {
		for _, w := range s.Workloads {
			clients := s.Clients
			if w != workloads.Hot && len(s.ManyKeysClients) > 0 {
				clients = s.ManyKeysClients
			}
			for _, n := range clients {
				for _, b := range bs {
					if !s.runs("none", b) {
						continue
					}
					spec := base
					spec.Workload, spec.Clients, spec.Duration = w, n, seconds(s.PerfSeconds)
					if w != workloads.Hot {
						spec.Keys = s.Keys
					}
					cases = append(cases, Case{Backend: b, Fault: none, Guards: []judge.Guard{judge.GuardNone}, Trial: trial,
						ClientsAs: results.ClientsGoroutines, Durability: results.DurabilityFast, Spec: spec})
				}
			}
		}
	}
	for _, name := range s.Faults {
		f, err := nemesis.Parse(name)
		if err != nil {
			return nil, asConfig(err)
		}
		guards := s.guards(f)
		profiles := s.Profiles[f.Class()]
		if len(profiles) == 0 {
			profiles = []string{results.DurabilityFast}
		}
		for trial := range max(s.Trials, 1) {
			for _, durability := range profiles {
				for _, b := range bs {
					if !s.runs(f.Class(), b) {
						continue
					}
					if !s.applies(f, b) || profileFits(b, durability) != "" {
						continue
					}
					spec := base
					spec.Workload, spec.Clients, spec.Duration = workloads.Hot, s.FaultClients, seconds(s.FaultSeconds)
					if f.Workload != "" && f.Workload != workloads.Hot {
						spec.Workload, spec.Keys = f.Workload, s.Keys
					}
					cases = append(cases, Case{Backend: b, Fault: f, Guards: guards, Trial: trial, ClientsAs: results.ClientsProcesses,
						Durability: durability, Injections: s.Injections, Spec: spec})
				}
			}
		}
	}
	leases, err := s.leaseCases(bs, base)
	if err != nil {
		return nil, err
	}
	cases = append(cases, leases...)
	if len(cases) == 0 {
		return nil, configErrorf("the suite has no case: give at least one backend, and clients or faults")
	}
	if err := validate(cases); err != nil {
		return nil, err
	}
	return cases, nil
}

// Skipped lists the fault classes of the suite that a backend is not put
// through, each with why (the suite runs a variant under some faults
// only, the backend's descriptor says the class cannot apply, or its
// servers here cannot have the fault), for results.File.Skipped: the
// report then says "not judged" with the reason. It assumes the suite's
// backends parse (Cases checks them).
func (s Suite) Skipped() []results.Skip {
	var out []results.Skip
	seen := map[[2]string]bool{}
	for _, spec := range s.Backends {
		b, err := ParseBackend(spec)
		if err != nil {
			continue
		}
		for _, name := range s.Faults {
			f, err := nemesis.Parse(name)
			if err != nil || seen[[2]string{spec, f.Class()}] {
				continue
			}
			reason := ""
			switch {
			case slices.Contains(s.Deferred[spec], f.Class()):
				reason = fmt.Sprintf("the %s suite leaves %s on %s to the full suite, for its time budget (the class applies: make bench-full runs it)", s.Name, f.Class(), spec)
			case !s.runs(f.Class(), b) && s.Only[f.Class()] != nil && !slices.Contains(s.Only[f.Class()], spec):
				reason = fmt.Sprintf("the %s suite runs %s on %v only (the full suite on every backend)", s.Name, f.Class(), s.Only[f.Class()])
			case !s.runs(f.Class(), b):
				reason = fmt.Sprintf("the suite runs the variant %s under %v only", spec, s.Variants[spec])
			case b.NotApplicable(f.Class()) != "":
				reason = b.NotApplicable(f.Class())
			case f.Fits(Shape(b)) != nil:
				reason = f.Fits(Shape(b)).Error()
			}
			if reason != "" {
				seen[[2]string{spec, f.Class()}] = true
				out = append(out, results.Skip{Backend: spec, FaultClass: f.Class(), Reason: reason})
			}
		}
	}
	return out
}

// validate returns the errors of the cases' specs, each once, so that bad
// settings fail before any server starts rather than skip every case.
func validate(cases []Case) error {
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
	return asConfig(errors.Join(errs...))
}

// guards are the guards the suite judges fault f under.
func (s Suite) guards(f nemesis.Fault) []judge.Guard {
	if f.Class() == "client-pause" {
		return append(slices.Clone(s.Guards), s.PauseGuards...)
	}
	return s.Guards
}

// applies reports whether the suite puts backend b through fault f: the
// suite runs the class on it (Variants), its descriptor does not say the
// class cannot apply, and its servers here can have the fault.
func (s Suite) applies(f nemesis.Fault, b Backend) bool {
	return s.runs(f.Class(), b) && b.NotApplicable(f.Class()) == "" && f.Fits(Shape(b)) == nil
}

// runs reports whether fault class f runs on backend b (see Variants
// and Only).
func (s Suite) runs(f string, b Backend) bool {
	faults, variant := s.Variants[b.Spec]
	only, limited := s.Only[f]
	return (!variant || slices.Contains(faults, f)) && (!limited || slices.Contains(only, b.Spec)) && !slices.Contains(s.Deferred[b.Spec], f)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Matrix is an explicit cross product of cases, as `lockbench run` builds
// it from its flags.
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
func Cross(m Matrix) ([]Case, error) {
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
		switch d {
		case results.DurabilityFast, results.DurabilityPeriodic, results.DurabilityDurable:
		default:
			return nil, configErrorf("durability %q: want %s, %s or %s", d, results.DurabilityFast, results.DurabilityPeriodic, results.DurabilityDurable)
		}
	}
	if len(m.Guards) == 0 {
		return nil, configErrorf("no guard: give at least one of %v", judge.Guards)
	}
	var cases []Case
	for _, spec := range m.Backends {
		b, err := ParseBackend(spec)
		if err != nil {
			return nil, err
		}
		for _, name := range m.Faults {
			f, err := nemesis.Parse(name)
			if err != nil {
				return nil, asConfig(err)
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
							cases = append(cases, Case{Backend: b, Fault: f, Guards: m.Guards, Trial: trial, ClientsAs: as,
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

// profileFits returns why backend b's servers cannot run under the
// durability profile, or "" when they can: ZooKeeper and etcd have no
// periodic mode (compose.Durability), and a backend without servers only
// the fast one, which is no profile at all.
func profileFits(b Backend, durability string) string {
	switch k := b.Descriptor.Servers.Kind; {
	case k == backends.NoServers && durability != results.DurabilityFast && durability != "":
		return "no servers: nothing to sync"
	case durability == results.DurabilityPeriodic && (k == backends.ZooKeeper || k == backends.Etcd):
		return fmt.Sprintf("%s has no periodic profile: it syncs its log at every commit (durable) or never (fast)", k)
	}
	return ""
}
