// Package nemesis is lockbench's fault catalogue: named scenarios that
// break the servers behind a backend while a workload runs, record when
// (the fault window), and heal before the run ends. A scenario acts on a
// Target (the compose nodes of the backend's cluster) through the hooks of
// workloads.Run: a Nemesis that kills, restarts, pauses, partitions,
// delays or shifts the clock of nodes, and a Section hook that makes
// holders stall — a GC pause, or a long critical section that spans the
// fault.
//
// Each scenario reproduces one argument of the Redlock debate:
//
//	none            no fault: the baseline, where every real backend must show zero violations
//	client-pause    a holder stalls past its TTL after acquiring, then writes (Kleppmann's GC pause)
//	failover        Sentinel: the lock is written to the master but held back from the replica, then a failover promotes the replica
//	restart         a majority of Redis nodes restart empty while their keys are held (antirez's delayed-restart case)
//	clock-jump      a majority of Redis nodes' clocks jump forward by the TTL: their keys expire at once
//	crash-minority  a minority of nodes (2 of 5 Redis, 1 of 3 ZooKeeper or etcd members) die during the load
//	partition       clients are cut off from a minority of nodes
//	latency         responses from a minority of nodes are slowed by 50 ms
//	leader-kill     the ZooKeeper or etcd leader dies
//
// In the node-fault scenarios (failover, restart, clock-jump) the sections
// granted around the fault hold for most of their TTL, so that the holder
// is still inside, and still within its lease, when the fault strikes: any
// overlap is then the backend's doing, not an expired lease's.
package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/workloads"
)

// Target is what a scenario can break: the servers behind one backend.
// Only the fields of the backend's topology are set.
type Target struct {
	// Redis are standalone masters: one for redis, five for redlock and
	// redsync.
	Redis []*compose.Node
	// Sentinel is the master–replica set of the sentinel backend.
	Sentinel *compose.SentinelSet
	// ZooKeeper and Etcd are the quorum clusters of those backends.
	ZooKeeper *compose.Ensemble
	Etcd      *compose.EtcdCluster
	// Proxies sit between the clients and each node (same order as the
	// nodes), for scenarios that cut or slow the clients' traffic; the
	// case's clients must then be configured with the proxies' addresses.
	Proxies []*compose.Proxy
}

// quorumNodes returns the members of a ZooKeeper or etcd cluster.
func (t Target) quorumNodes() []*compose.Node {
	switch {
	case t.ZooKeeper != nil:
		return t.ZooKeeper.Nodes
	case t.Etcd != nil:
		return t.Etcd.Nodes
	}
	return nil
}

// leader returns the leader of a ZooKeeper or etcd cluster.
func (t Target) leader(ctx context.Context) (*compose.Node, error) {
	switch {
	case t.ZooKeeper != nil:
		return t.ZooKeeper.Leader(ctx)
	case t.Etcd != nil:
		return t.Etcd.Leader(ctx)
	}
	return nil, fmt.Errorf("no ZooKeeper or etcd cluster")
}

// Scenario is one named fault.
type Scenario struct {
	// Name is the scenario's name on the command line and in results.
	Name string
	// Doc says in a sentence what the scenario does.
	Doc string
	// Proxied means the case's clients must reach the nodes through
	// Target.Proxies.
	Proxied bool
	// Fresh means the scenario leaves the cluster changed for good (a
	// failover moves the master): run each case on a new cluster, and
	// the next case of any scenario on a new one too.
	Fresh bool
	// MinTTL is the shortest lease TTL that keeps the scenario honest (a
	// failover takes seconds; a lease that expires during it would
	// overlap for the wrong reason). Cases raise their TTL to it.
	MinTTL time.Duration
	// Workload is the workload the scenario needs, if any: a suite runs
	// the scenario on it rather than on its default.
	Workload workloads.Workload

	fits  func(Shape) error
	hooks func(Target, workloads.Spec) workloads.Hooks
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
	// Proxied is set when proxies sit between the clients and the nodes.
	Proxied bool
}

// Shape returns t's shape.
func (t Target) Shape() Shape {
	return Shape{
		RedisNodes:  len(t.Redis),
		Sentinel:    t.Sentinel != nil && len(t.Sentinel.ReplicationLinks) > 0 && t.Sentinel.ReplicationLinks[0] != nil,
		QuorumNodes: len(t.quorumNodes()),
		Proxied:     len(t.Proxies) > 0,
	}
}

// Fits returns nil if the scenario can run against a cluster of shape sh,
// or an error saying why not. A cluster lockbench starts can always be
// proxied, so Fits does not ask for proxies; Applies does.
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
// saying why not (the CLI skips such cases and says so).
func (s *Scenario) Applies(t Target) error {
	if err := s.Fits(t.Shape()); err != nil {
		return err
	}
	if s.Proxied && len(t.Proxies) == 0 {
		return fmt.Errorf("fault %s: needs proxies between the clients and the nodes", s.Name)
	}
	return nil
}

// Hooks returns the workloads.Hooks that inject the fault into a run of
// spec (already normalised) against t. Check Applies first.
func (s *Scenario) Hooks(t Target, spec workloads.Spec) workloads.Hooks {
	if s.hooks == nil {
		return workloads.Hooks{}
	}
	return s.hooks(t, spec)
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

// window is the part of a run during which a fault is in effect: its
// middle third.
func window(spec workloads.Spec) (from, to time.Duration) {
	return spec.Duration / 3, 2 * spec.Duration / 3
}

// holdAcross makes the sections granted from a quarter TTL before the
// fault until a quarter TTL after it hold for three quarters of their TTL:
// whoever holds the key when the fault strikes is still inside its
// section for at least half a TTL, and still within its lease (validity
// is the TTL less the drift allowance), so an overlap is the fault's
// doing, not an expired lease's.
func holdAcross(spec workloads.Spec, at time.Duration) workloads.SectionHook {
	return workloads.Between(max(at-spec.TTL/4, 0), at+spec.TTL/4, workloads.Stall{For: spec.TTL * 3 / 4, At: workloads.BeforeWrite})
}

func needRedis(sh Shape) error {
	if sh.RedisNodes == 0 {
		return fmt.Errorf("applies to Redis-based backends with standalone nodes (redis, redlock, redsync)")
	}
	return nil
}

func needQuorumCluster(sh Shape) error {
	if sh.QuorumNodes == 0 {
		return fmt.Errorf("applies to ZooKeeper and etcd")
	}
	return nil
}

func needMinority(sh Shape) error {
	if sh.RedisNodes >= 3 || sh.QuorumNodes >= 3 {
		return nil
	}
	return fmt.Errorf("needs a cluster of at least 3 nodes (Redlock, redsync, ZooKeeper or etcd)")
}

// minority returns the nodes (and their proxies, if any) of a minority:
// 2 of 5 Redis nodes, 1 of 3 members; not the leader of a quorum cluster,
// so that crash-minority stays apart from leader-kill. When the leader
// cannot be told it still picks a minority, and says why it may hold the
// leader in the error.
func minority(ctx context.Context, t Target) ([]*compose.Node, []*compose.Proxy, error) {
	nodes := t.Redis
	var leader *compose.Node
	var err error
	if len(nodes) == 0 {
		nodes = t.quorumNodes()
		if leader, err = t.leader(ctx); err != nil {
			err = fmt.Errorf("the minority may hold the leader: %w", err)
		}
	}
	k := (len(nodes) - 1) / 2
	var picked []*compose.Node
	var proxies []*compose.Proxy
	for i := len(nodes) - 1; i >= 0 && len(picked) < k; i-- {
		if nodes[i] == leader {
			continue
		}
		picked = append(picked, nodes[i])
		if i < len(t.Proxies) {
			proxies = append(proxies, t.Proxies[i])
		}
	}
	slices.Reverse(picked)
	slices.Reverse(proxies)
	return picked, proxies, err
}

// minorityNodes picks the nodes of a minority, for during.
func minorityNodes(t Target) func(context.Context) ([]*compose.Node, error) {
	return func(ctx context.Context) ([]*compose.Node, error) {
		nodes, _, err := minority(ctx, t)
		return nodes, err
	}
}

// minorityProxies picks the proxies of a minority's nodes, for during.
func minorityProxies(t Target) func(context.Context) ([]*compose.Proxy, error) {
	return func(ctx context.Context) ([]*compose.Proxy, error) {
		_, proxies, err := minority(ctx, t)
		return proxies, err
	}
}

// majority returns a majority of the Redis nodes: all of one, 3 of 5.
func majority(t Target) []*compose.Node {
	return t.Redis[:len(t.Redis)/2+1]
}
