// Package nemesis is lockbench's fault catalogue: named scenarios that
// break the servers behind a backend (or stop its clients' processes)
// while a workload runs, again and again on a schedule, at targets drawn
// from the case's seed, recording each injection and its window, and
// healing before the case ends. A Fault made into a Nemesis for one case
// is a peer of the case's clients: attached to the case's judge, it
// decides for every grant whether the section holds long or its holder's
// process stops (a GC or VM pause), stops and resumes those processes
// itself, and from the start barrier kills, restarts, pauses, powers
// off, partitions, delays or moves the clock of the servers on its
// schedule; it records its own injections, their targets and windows,
// what each tested, and its failures to inject (Record), which the
// runner hands to the outcome.
//
// A scenario knows no backend: it acts on a Target, the servers behind a
// backend with the controls their cluster has (a leader to find, member
// traffic to cut, a Sentinel set to fail over), and asks of its shape
// whether it can run at all: a scenario Requires capabilities (a leader,
// peer links, a clock it can move, data it can lose, a failover, a proxy),
// and applies exactly where the cluster has them; where it lacks one, the
// reason is the one its server kind (package kinds) or the mechanism
// wrote for it, once.
//
// Each scenario reproduces an argument of the Redlock debate or a fault a
// consensus system exists for:
//
//	none             no fault: the baseline, where every real backend must show zero violations
//	client-pause     a client's process is stopped (SIGSTOP) for x × the backend's lease, then resumed: after its read, so that it writes
//	                 late (Kleppmann's GC pause), or at=before-read, after-write, acquire (inside Acquire) or extend (inside its
//	                 lease's auto-extension); param x (default 1.5)
//	server-pause     a minority of the servers, or the leader (the master, the single server), is stopped (SIGSTOP) for a while, then resumed
//	failover         Sentinel: the lock is written to the master but held back from the replica, then a failover promotes the replica
//	restart          a majority of the nodes (the single server) is shut down in order and started again while a holder is inside its section
//	crash            a majority is killed (SIGKILL) and started again on the same disk: the kernel kept what it wrote, synced or not
//	power-loss       a majority loses power: every write not synced is lost (a lazy filesystem), then it starts again; param delay (in key
//	                 lifetimes)
//	clock-jump       the wall clock of a minority or majority (the leader first) jumps forward, for real (a clock preload);
//	                 params by (in key lifetimes, default 1) and nodes=minority|majority (default majority)
//	clock-rate       the wall clock of a minority or majority runs fast for a while; params rate (default 2) and nodes
//	crash-minority   a minority of the nodes (any of them: the leader, Redlock's priority node) dies for a while, then restarts with its data
//	partition        the clients are cut off from a minority of the nodes (the single server, a Sentinel set's master and its sentinels with
//	                 it): routes dropped, no clean close; param x (the cut's length in leases)
//	latency          responses from a minority of the nodes (the single server) are slowed by 50 ms
//	partition-leader the ZooKeeper or etcd leader is cut off from the other members (clients still reach it), then healed
//	partition-halves the ZooKeeper or etcd members are split into a minority and a majority, then healed
//	leader-kill      the ZooKeeper or etcd leader dies, then restarts with its data
//	mixed            a seeded schedule of the classes above that apply, an injection every few seconds, composed pairs included
//	                 (server-pause+partition, restart+partition, clock-jump+restart); each injection records its class; param seconds
//	split-view       two clients (the holder first), each in a namespace of its own, are cut from different minorities: of 5 nodes
//	                 A sees {0,1,2}, B {2,3,4}; param x
//	client-leader    one client, in a namespace of its own, is cut from the leader alone; the others keep it; param x
//
// Every injection proves it tested something (see prove.go): it waits
// for the lock to grant, strikes while a section of the faulted key is
// open, reads back from the servers (or the client process) what the
// fault did, and records both (results.Target's Tested, WhyNot,
// Precondition and Effect). An injection that met no granting lock or no
// open section is not tested, and the schedule strikes again; a case may
// run longer for that (Nemesis.Duration), and ends once it has its tested
// injections. An effect that cannot be read back fails the case.
//
// Targets are drawn from the case's random source, which the run's seed
// determines, so a run replays with --seed; every injection records the
// nodes it hit and whether the leader or a Redlock priority node was among
// them. Around node faults that could grant a key twice (failover,
// restart, crash, power-loss, clock faults) the section the strike waits
// for holds for most of its TTL, so that its holder is still inside it,
// and within its lease, when the fault strikes: an overlap is then the
// backend's doing, not an expired lease's.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/workloads"
)

// ErrFault is what a fault spec that cannot work wraps: an unknown
// scenario, a param it does not take, a bad value. The error names the
// value.
var ErrFault = errors.New("bad fault")

// faultErrorf returns an error wrapping ErrFault with a message that
// names the bad value.
func faultErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFault, fmt.Sprintf(format, args...))
}

// Target is what a scenario can break: the servers behind one backend,
// whatever their topology, and the controls their cluster has. Only Nodes
// is needed; the rest is set where the cluster has it. Nodes and controls
// are what the nemesis asks of them (Node and its capabilities, Leader,
// Members, FailoverSet), so that any server can be a target: package kinds
// builds the targets of the servers lockbench starts.
type Target struct {
	// Nodes are the servers a scenario may pick from: Redis masters,
	// quorum members, a PostgreSQL server, a Sentinel set's master and
	// replicas.
	Nodes []Node
	// Priority lists the indices in Nodes of the nodes the backend prefers
	// (where Redlock's fast path and hand-off live), so that an injection
	// says when it hit one.
	Priority []int
	// Leader, when set, finds the current leader or master among Nodes.
	Leader Leader
	// Elects is set when the nodes elect their leader among themselves
	// (ZooKeeper, etcd): a fault's window then outlasts an election, and
	// leader faults apply.
	Elects bool
	// Members, when set, cuts and heals the traffic between the members
	// (ZooKeeper and etcd in network namespaces of their own).
	Members Members
	// Sentinel, when set, is the set whose master failover loses (a
	// Sentinel set).
	Sentinel FailoverSet
	// Quorum is set when the backend's client asks a quorum of the
	// independent nodes itself (Redlock, redsync): ClientQuorum.
	Quorum bool
	// ClientClock is set when the backend's client measures a lease's
	// validity on the clock its worker gives it: ClientClock.
	ClientClock bool
	// Why says why the cluster lacks a capability it lacks, in its kind's
	// words (Shape.Why).
	Why map[Capability]string
	// Probe, when set, reads what node n holds of the keys whose names
	// contain substr, as the backend stores them (its descriptor's
	// Probe, on that node alone): what a fault that may lose or expire
	// keys is read back from.
	Probe func(ctx context.Context, n Node, substr string) (Stored, error)
}

// Stored is what one server holds of a case's keys (backends.Stored).
type Stored = backends.Stored

// leader returns the target's leader, or nil without one.
func (t Target) leader(ctx context.Context) (Node, error) {
	if t.Leader == nil {
		return nil, nil
	}
	return t.Leader.Leader(ctx)
}

// Shape is what a scenario needs to know of a target to tell whether it
// applies: known from a backend's servers before any starts, so a suite
// can leave out the cases that would only be skipped.
type Shape struct {
	// Nodes is the number of servers a scenario may pick from.
	Nodes int
	// Caps are the capabilities the cluster has. Before any server
	// starts, a runner's shape says what the backend's servers can be
	// started with here (a lazy filesystem, the clock preload, network
	// namespaces), which a scenario's Needs then asks for.
	Caps Capability
	// Why says, for a capability the cluster lacks, why: the words of the
	// server kind or the mechanism that does not implement it. A lacking
	// capability it does not name gets what the capability takes.
	Why map[Capability]string
}

// Shape returns t's shape: what its fields and its nodes offer, with t's
// reasons for the rest.
func (t Target) Shape() Shape {
	sh := Shape{Nodes: len(t.Nodes), Why: t.Why}
	if len(t.Nodes) == 0 {
		return sh
	}
	sh.Caps = Servers | ClientLinks | Proxy | LosableData | MovableClock
	for _, n := range t.Nodes {
		c, cuts := n.(ClientCutter)
		p, proxied := n.(Proxied)
		d, disk := n.(Disk)
		k, clock := n.(Clock)
		each := map[Capability]bool{
			ClientLinks: cuts && c.Cuttable(), Proxy: proxied && p.HasProxy(), LosableData: disk && d.HasLazyFS(),
			MovableClock: clock && k.HasFakeClock(),
		}
		for c, has := range each {
			if !has {
				sh.Caps &^= c
			}
		}
	}
	for c, has := range map[Capability]bool{
		Minority: len(t.Nodes) >= 3, Leadership: t.Leader != nil, Election: t.Elects, PeerLinks: t.Members != nil,
		Failover:   t.Sentinel != nil && len(t.Sentinel.ReplicationLinks()) > 0,
		ClientNets: t.clientNets(), ClientQuorum: t.Quorum, ClientClock: t.ClientClock,
	} {
		if has {
			sh.Caps |= c
		}
	}
	return sh
}

// Env is what a scenario acts on in one case.
type Env struct {
	Target Target
	// Spec is the case's load, normalised.
	Spec workloads.Spec
	// Lease is how long the backend keeps the key of a holder that went
	// silent: the TTL (as the backend rounds it), or its session timeout
	// when that is longer (ZooKeeper). Pauses are sized from it.
	Lease time.Duration
	// KeyLife is how long a key lives on the servers after its holder's
	// last request: the TTL for most, longer for a lock that keeps its
	// keys ahead of the leases it promises (rueidislock). Clock jumps are
	// sized from it; zero means the case's TTL.
	KeyLife time.Duration
	// Injections is how many times the fault strikes in the case (at
	// least 1; fewer when the windows do not fit in the case).
	Injections int
	// Rand draws targets and times; the case's seed determines it.
	Rand *rand.Rand
	// Params are the fault's params (client-pause?x=1.5 gives x).
	Params url.Values

	// nets are the case's client namespaces (the nemesis's).
	nets *clientNets
	// wait, when set, replaces grantWait (tests).
	wait time.Duration
}

// Scenario is one named fault.
type Scenario struct {
	// Name is the scenario's name in the catalogue.
	Name string
	// Doc says in a sentence what the scenario does.
	Doc string
	// Params documents the params the scenario takes, by name.
	Params map[string]string
	// Note, when set, is said in every case of the scenario: what a
	// reader must know to read its numbers.
	Note string
	// Proxied means the case's clients must reach the nodes through their
	// proxies.
	Proxied bool
	// Processes means the scenario stops clients' processes: the case
	// must run its clients as processes.
	Processes bool
	// SplitNets means the runner starts each client process in a network
	// namespace of its own on the nodes' peer network (a ClientNet)
	// and hands it over (Nemesis.AddClientNet): split views.
	SplitNets bool
	// Needs is what the case's servers must be started with.
	Needs Needs
	// Fresh means the scenario leaves the cluster changed for good (a
	// failover moves the master): run each case on a new cluster, and the
	// next case of any scenario on a new one too.
	Fresh bool
	// MinTTL is the shortest lease TTL that keeps the scenario honest (a
	// failover takes seconds; a lease that expires during it would
	// overlap for the wrong reason). Cases raise their TTL to it.
	MinTTL time.Duration
	// QuorumDuration is the shortest case on a cluster whose members elect
	// their leader (ZooKeeper, etcd) that fits the injections (an election, and the recovery after a
	// partition, take seconds). Such cases raise their duration to it.
	QuorumDuration time.Duration
	// Workload is the workload the scenario needs, if any.
	Workload workloads.Workload

	// Requires are the capabilities a cluster must have for the scenario
	// to apply to it.
	Requires Capability
	check    func(url.Values) error
	plan     func(Env) plan
	// span, when set, is how long one injection needs, its window and the
	// gap after it, given the params and the backend's lease: cases
	// stretch so that every injection fits without meeting the next.
	span func(p url.Values, sh Shape, lease time.Duration) time.Duration
	// length, when set, is the shortest case its params ask for, given
	// the backend's lease, however many injections the case asks (mixed's
	// seconds, a failover's wait): cases stretch to it.
	length func(p url.Values, lease time.Duration) time.Duration
}

// Needs is what a scenario needs of the servers it breaks, beyond their
// being there: a runner starts the servers of its cases so, and only
// then (a lazy filesystem slows every write; the clock preload adds to
// every clock read).
type Needs struct {
	// LazyFS puts the servers' data on a lazy filesystem (power loss).
	LazyFS bool
	// FakeClock runs the servers under the clock preload (clock faults).
	FakeClock bool
	// Netns runs the servers in network namespaces of their own, so that
	// their clients can be cut off (partition).
	Netns bool
	// Optional asks for the above only where the servers' kind offers
	// them: a scenario that picks what applies to each cluster (mixed)
	// runs on what it gets, where the others refuse a kind that lacks one.
	Optional bool
}

// Fault is a scenario with its params, as a case names it:
// "client-pause?x=1.5".
type Fault struct {
	*Scenario
	// Spec is the fault as written; results name it so.
	Spec   string
	Params url.Values
}

// Class is the fault's scenario name: backends are compared on classes.
func (f Fault) Class() string { return f.Name }

// Parse parses a fault as written on the command line: a scenario name,
// optionally with params (clock-jump?by=0.5&nodes=minority). The error
// names an unknown scenario or a bad param.
func Parse(spec string) (Fault, error) {
	name, query, _ := strings.Cut(spec, "?")
	s, err := Lookup(name)
	if err != nil {
		return Fault{}, err
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return Fault{}, faultErrorf("fault %q: params: %v", spec, err)
	}
	for k := range v {
		if _, ok := s.Params[k]; !ok {
			return Fault{}, faultErrorf("fault %q: unknown param %q (%s takes %s)", spec, k, name, paramNames(s))
		}
	}
	if s.check != nil {
		if err := s.check(v); err != nil {
			return Fault{}, faultErrorf("fault %q: %v", spec, err)
		}
	}
	return Fault{Scenario: s, Spec: spec, Params: v}, nil
}

func paramNames(s *Scenario) string {
	if len(s.Params) == 0 {
		return "none"
	}
	var names []string
	for k := range s.Params {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Fits returns nil if the scenario can run against a cluster of shape sh
// (it has every capability the scenario Requires), or an *Inapplicable
// naming the first it lacks and sh's reason.
func (s *Scenario) Fits(sh Shape) error { return sh.requires(s.Name, s.Requires) }

// Applies returns nil if the scenario can run against t, or an error
// saying why not.
func (s *Scenario) Applies(t Target) error { return s.Fits(t.Shape()) }

// MinDuration is the shortest case of the fault on a cluster of shape sh
// that fits its injections, apart, for a backend whose lease is lease.
func (f Fault) MinDuration(sh Shape, lease time.Duration, injections int) time.Duration {
	var d time.Duration
	if sh.Has(Election) {
		d = f.QuorumDuration
	}
	if f.span != nil {
		// The injections take the middle three quarters of the case (slots).
		d = max(d, time.Duration(max(injections, 1))*f.span(f.Params, sh, lease)*4/3)
	}
	if f.length != nil {
		d = max(d, f.length(f.Params, lease))
	}
	return d
}

// Nemesis returns the fault at work on one case, against e's target:
// attach it to the case's judge before the clients start (Attach), give
// it the case's client processes (AddProcess), and Stop it once the
// clients are done, for its record.
func (f Fault) Nemesis(e Env) *Nemesis {
	n := newNemesis()
	if f.plan == nil {
		n.plan.planned = e.Spec.Duration
		return n
	}
	e.Params = f.Params
	e.nets = &n.nets
	e.Injections = max(e.Injections, 1)
	if e.Rand == nil {
		e.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	n.plan = f.plan(e)
	if n.plan.planned == 0 {
		n.plan.planned = e.Spec.Duration
	}
	return n
}

// Lookup returns the scenario called name.
func Lookup(name string) (*Scenario, error) {
	for _, s := range catalogue {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, faultErrorf("unknown fault %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names lists the scenarios in catalogue order.
func Names() []string {
	names := make([]string, len(catalogue))
	for i, s := range catalogue {
		names[i] = s.Name
	}
	return names
}

// float returns the param name as a positive number, or def.
func float(v url.Values, name string, def float64) float64 {
	s := v.Get(name)
	if s == "" {
		return def
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || !(x > 0) {
		return def
	}
	return x
}

// checkFloat refuses a param that is not a positive number.
func checkFloat(v url.Values, name string) error {
	if s := v.Get(name); s != "" {
		if x, err := strconv.ParseFloat(s, 64); err != nil || !(x > 0) || x > 100 {
			return fmt.Errorf("%s=%q: want a positive number up to 100", name, s)
		}
	}
	return nil
}
