// Package nemesis is lockbench's fault catalogue: named scenarios that
// break the servers behind a backend (or stop its clients' processes)
// while a workload runs, again and again on a schedule, at targets drawn
// from the case's seed, recording each injection and its window, and
// healing before the case ends. A scenario acts through the hooks of a
// case (workloads.Hooks): a Nemesis that kills, restarts, pauses,
// partitions, delays or shifts the clock of nodes, and a Section hook that
// stops a holder's process (a GC or VM pause) or makes a section hold
// across a fault.
//
// Each scenario reproduces an argument of the Redlock debate or a fault a
// consensus system exists for:
//
//	none             no fault: the baseline, where every real backend must show zero violations
//	client-pause     a holder's process is stopped (SIGSTOP) after it read, for x × the backend's lease, then resumed and writes (Kleppmann's GC pause);
//	                 params x (default 1.5) and at=before-read
//	server-pause     a minority of the servers, or the leader (the master, the single server), is stopped (SIGSTOP) for a while, then resumed
//	failover         Sentinel: the lock is written to the master but held back from the replica, then a failover promotes the replica
//	restart          a majority of the Redis nodes (the PostgreSQL server) restart while their keys are held: empty under the fast profile, with their data under the durable one
//	clock-jump       an emulated clock jump: the keys on a minority or majority of the Redis nodes expire by a fraction of the TTL at once (Redis has no clock to set);
//	                 params by (in TTLs, default 1) and nodes=minority|majority (default majority)
//	crash-minority   a minority of the nodes (any of them: the leader, Redlock's priority node) dies for a while, then restarts with its data
//	partition        the clients are cut off from a minority of the nodes (the single server)
//	latency          responses from a minority of the nodes (the single server) are slowed by 50 ms
//	partition-leader the ZooKeeper or etcd leader is cut off from the other members (clients still reach it), then healed
//	partition-halves the ZooKeeper or etcd members are split into a minority and a majority, then healed
//	leader-kill      the ZooKeeper or etcd leader dies, then restarts with its data
//
// Targets are drawn from the case's random source, which the run's seed
// determines, so a run replays with --seed; every injection records the
// nodes it hit and whether the leader or a Redlock priority node was among
// them. Around node faults that could grant a key twice (failover,
// restart, clock-jump) the sections granted hold for most of their TTL,
// so that a holder is still inside its section, and within its lease,
// when the fault strikes: an overlap is then the backend's doing, not an
// expired lease's.
package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// Target is what a scenario can break: the servers behind one backend.
// Only the fields of the backend's topology are set.
type Target struct {
	// Redis are standalone masters: one for redis and rueidislock, five
	// for redlock and redsync.
	Redis []*compose.Node
	// Priority lists the indices in Redis of the nodes a Redlock prefers
	// (where its fast path and hand-off live), so that an injection says
	// when it hit one.
	Priority []int
	// Sentinel is the master–replica set of the sentinel backend.
	Sentinel *compose.SentinelSet
	// ZooKeeper and Etcd are the quorum clusters of those backends.
	ZooKeeper *compose.Ensemble
	Etcd      *compose.EtcdCluster
	// Postgres is the PostgreSQL server of the postgres backend.
	Postgres *compose.Node
	// PeerNetwork is set when the ZooKeeper or etcd members run in
	// network namespaces of their own (compose's PeerNetwork), so that
	// their traffic between themselves can be cut.
	PeerNetwork bool
}

// peers is a quorum cluster whose members can be partitioned from each
// other.
type peers interface {
	Partition(groups ...[]*compose.Node) error
	HealPartition() error
	AwaitServing(ctx context.Context) error
}

// peers returns the cluster's member-to-member controls, or nil.
func (t Target) peers() peers {
	switch {
	case !t.PeerNetwork:
		return nil
	case t.ZooKeeper != nil:
		return t.ZooKeeper
	case t.Etcd != nil:
		return t.Etcd
	}
	return nil
}

// nodes returns the servers a scenario may pick from: the Redis nodes,
// the quorum members, the PostgreSQL server, or the Sentinel set's data
// nodes.
func (t Target) nodes() []*compose.Node {
	switch {
	case len(t.Redis) > 0:
		return t.Redis
	case t.ZooKeeper != nil:
		return t.ZooKeeper.Nodes
	case t.Etcd != nil:
		return t.Etcd.Nodes
	case t.Postgres != nil:
		return []*compose.Node{t.Postgres}
	case t.Sentinel != nil:
		return append([]*compose.Node{t.Sentinel.Master}, t.Sentinel.Replicas...)
	}
	return nil
}

// leader returns the leader of a ZooKeeper or etcd cluster, or the
// Sentinel set's current master; nil without one.
func (t Target) leader(ctx context.Context) (*compose.Node, error) {
	switch {
	case t.ZooKeeper != nil:
		return t.ZooKeeper.Leader(ctx)
	case t.Etcd != nil:
		return t.Etcd.Leader(ctx)
	case t.Sentinel != nil:
		addr, err := t.Sentinel.CurrentMaster(ctx)
		if err != nil {
			return nil, err
		}
		if n := t.Sentinel.Node(addr); n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("the master %s is none of the set's nodes", addr)
	}
	return nil, nil
}

// Shape is what a scenario needs to know of a cluster to tell whether it
// applies: known from a backend's topology before any server starts, so
// a suite can leave out the cases that would only be skipped.
type Shape struct {
	// RedisNodes is the number of standalone Redis masters.
	RedisNodes int
	// Sentinel is set for a master–replica set whose replication can be
	// held back (proxied replication links).
	Sentinel bool
	// QuorumNodes is the number of ZooKeeper or etcd members.
	QuorumNodes int
	// Postgres is set for a PostgreSQL server.
	Postgres bool
	// PeerNetwork is set when the quorum members' traffic between
	// themselves can be cut.
	PeerNetwork bool
}

// Shape returns t's shape.
func (t Target) Shape() Shape {
	sh := Shape{RedisNodes: len(t.Redis), Postgres: t.Postgres != nil}
	sh.Sentinel = t.Sentinel != nil && len(t.Sentinel.ReplicationLinks) > 0 && t.Sentinel.ReplicationLinks[0] != nil
	if t.ZooKeeper != nil || t.Etcd != nil {
		sh.QuorumNodes = len(t.nodes())
		sh.PeerNetwork = t.PeerNetwork
	}
	return sh
}

func (sh Shape) servers() int {
	n := sh.RedisNodes + sh.QuorumNodes
	if sh.Postgres {
		n++
	}
	if sh.Sentinel {
		n++
	}
	return n
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
	// Durable is set under the durable profile: a restarted Redis node
	// keeps what it acknowledged.
	Durable bool
	// Injections is how many times the fault strikes in the case (at
	// least 1; fewer when the windows do not fit in the case).
	Injections int
	// Rand draws targets and times; the case's seed determines it.
	Rand *rand.Rand
	// Params are the fault's params (client-pause?x=1.5 gives x).
	Params url.Values
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
	// Fresh means the scenario leaves the cluster changed for good (a
	// failover moves the master): run each case on a new cluster, and the
	// next case of any scenario on a new one too.
	Fresh bool
	// MinTTL is the shortest lease TTL that keeps the scenario honest (a
	// failover takes seconds; a lease that expires during it would
	// overlap for the wrong reason). Cases raise their TTL to it.
	MinTTL time.Duration
	// QuorumDuration is the shortest case on a ZooKeeper or etcd cluster
	// that fits the injections (an election, and the recovery after a
	// partition, take seconds). Such cases raise their duration to it.
	QuorumDuration time.Duration
	// Workload is the workload the scenario needs, if any.
	Workload workloads.Workload

	fits  func(Shape) error
	check func(url.Values) error
	hooks func(Env) workloads.Hooks
	// span, when set, is how long one injection needs, its window and the
	// gap after it, given the params and the backend's lease: cases
	// stretch so that every injection fits without meeting the next.
	span func(p url.Values, sh Shape, lease time.Duration) time.Duration
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
		return Fault{}, locker.Invalidf("fault %q: params: %v", spec, err)
	}
	for k := range v {
		if _, ok := s.Params[k]; !ok {
			return Fault{}, locker.Invalidf("fault %q: unknown param %q (%s takes %s)", spec, k, name, paramNames(s))
		}
	}
	if s.check != nil {
		if err := s.check(v); err != nil {
			return Fault{}, locker.Invalidf("fault %q: %v", spec, err)
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

// Fits returns nil if the scenario can run against a cluster of shape sh,
// or an error saying why not.
func (s *Scenario) Fits(sh Shape) error {
	if s.fits == nil {
		return nil
	}
	if err := s.fits(sh); err != nil {
		return fmt.Errorf("fault %s: %w", s.Name, err)
	}
	return nil
}

// Applies returns nil if the scenario can run against t, or an error
// saying why not.
func (s *Scenario) Applies(t Target) error { return s.Fits(t.Shape()) }

// MinDuration is the shortest case of the fault on a cluster of shape sh
// that fits its injections, apart, for a backend whose lease is lease.
func (f Fault) MinDuration(sh Shape, lease time.Duration, injections int) time.Duration {
	var d time.Duration
	if sh.QuorumNodes > 0 {
		d = f.QuorumDuration
	}
	if f.span != nil {
		// The injections take the middle three quarters of the case (slots).
		d = max(d, time.Duration(max(injections, 1))*f.span(f.Params, sh, lease)*4/3)
	}
	return d
}

// Hooks returns the hooks that inject the fault into a case.
func (f Fault) Hooks(e Env) workloads.Hooks {
	if f.hooks == nil {
		return workloads.Hooks{}
	}
	e.Params = f.Params
	e.Injections = max(e.Injections, 1)
	if e.Rand == nil {
		e.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return f.hooks(e)
}

// Lookup returns the scenario called name.
func Lookup(name string) (*Scenario, error) {
	for _, s := range catalogue {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, locker.Invalidf("unknown fault %q (known: %s)", name, strings.Join(Names(), ", "))
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

// slots returns when each injection starts, from the case start: evenly
// spread over the middle of the case, each drawn at random within its
// slot so that a window of length and a gap after it fit. There are
// e.Injections of them, or fewer when they do not fit.
func (e Env) slots(length, gap time.Duration) []time.Duration {
	from, to := e.Spec.Duration/8, e.Spec.Duration-e.Spec.Duration/8
	k := e.Injections
	for k > 1 && (to-from)/time.Duration(k) < length+gap {
		k--
	}
	slot := (to - from) / time.Duration(k)
	out := make([]time.Duration, k)
	for i := range out {
		jitter := max(slot-length-gap, 0)
		out[i] = from + time.Duration(i)*slot + time.Duration(e.Rand.Int64N(int64(jitter)+1))
	}
	return out
}

// pick draws k of nodes at random (all of them when k ≥ len(nodes)).
func (e Env) pick(nodes []*compose.Node, k int) []*compose.Node {
	idx := e.Rand.Perm(len(nodes))
	var out []*compose.Node
	for _, i := range idx[:min(k, len(nodes))] {
		out = append(out, nodes[i])
	}
	slices.SortFunc(out, func(a, b *compose.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// minority draws a minority of the servers: (n−1)/2 of n, or the one
// server of a single-node backend.
func (e Env) minority() []*compose.Node {
	nodes := e.Target.nodes()
	return e.pick(nodes, max((len(nodes)-1)/2, 1))
}

// majority draws a majority of the servers: n/2+1 of n.
func (e Env) majority() []*compose.Node {
	nodes := e.Target.nodes()
	return e.pick(nodes, len(nodes)/2+1)
}

// describe records what an injection hits: node names, and whether the
// leader or a priority node is among them.
func (e Env) describe(ctx context.Context, nodes []*compose.Node) results.Target {
	t := results.Target{}
	leader, _ := e.Target.leader(ctx)
	for _, n := range nodes {
		t.Nodes = append(t.Nodes, n.Name)
		t.Leader = t.Leader || (leader != nil && n == leader)
		for _, i := range e.Target.Priority {
			t.Priority = t.Priority || (i < len(e.Target.Redis) && e.Target.Redis[i] == n)
		}
	}
	return t
}

// names joins node names for a window's label.
func names(nodes []*compose.Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

// each applies op to every node at once and waits: faults on several
// nodes strike together, as in a rack power loss.
func each(f *workloads.Faults, nodes []*compose.Node, op func(*compose.Node) error) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { f.Fail(op(n)) })
	}
	wg.Wait()
}
