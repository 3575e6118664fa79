// Package sentinel is the server kind of a Redis master with replicas,
// watched by redis-sentinel processes that promote a replica when the
// master fails: it starts such a set on compose's toolkit (StartSet, Set)
// and registers what the set offers the faults.
package sentinel

import (
	"context"
	"slices"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/nemesis"
)

func init() {
	// A sentinel on a host runs redis-server --sentinel.
	kinds.Register(kinds.Kind{Name: backends.Sentinel, Offers: Offers, Start: Start,
		StartCost: kinds.Once(4 * time.Second), Versions: redis.Versions,
		OnHost: func() inventory.Needs { return inventory.Needs{Binary: redis.DefaultPrograms().Server} }})
}

// Offers is what a Sentinel set of n Redis nodes (a master and n-1
// replicas) offers the faults: a master to find, and a failover whose
// replication can be held back; its nodes can be paused, killed, cut off
// from their clients, powered off and have their clocks moved. Its
// clients reach no node through a proxy, and its nodes elect nothing.
func Offers(n int) kinds.Offer {
	o := kinds.Offer{
		Caps: nemesis.Servers | nemesis.Leadership | nemesis.Failover | nemesis.ClientLinks | nemesis.LosableData | nemesis.MovableClock,
		Why: map[nemesis.Capability]string{
			nemesis.ClientNets: "a Sentinel set's clients ask its sentinels, which run on this host, for the master: " +
				"a client namespace of the nodes' network does not reach them",
			nemesis.ClientQuorum: "a Sentinel set's clients ask the one master its sentinels name, not a quorum",
			nemesis.Proxy: "needs servers the clients reach through proxies; " +
				"Sentinel's clients follow the master the sentinels name, around any proxy",
			nemesis.Election: "a Sentinel set's Redis nodes elect nothing and only replicate from the master: the sentinels pick the master " +
				"(killing it is the failover fault's case, which cuts its replication too)",
			nemesis.Minority: "needs a cluster of at least 3 nodes: the Sentinel set has a master and one replica " +
				"(losing the master is the failover fault's case)",
		},
	}
	if n >= 3 {
		o.Caps |= nemesis.Minority
	}
	return o
}

// Start starts a Sentinel set of spec.Count Redis nodes, a master and
// replicas, and the sentinels that watch them: here, with its
// replication through proxies that the failover fault holds back — but
// for a set in network namespaces, where a cut of the master's clients
// would take those proxies in, and with them the replication a real
// partition of the clients leaves up — or on the hosts spec.On names
// (see on). Its clients ask its sentinels for the master.
func Start(ctx context.Context, env *compose.Env, spec kinds.Spec) (*kinds.Cluster, error) {
	cs := spec.Compose()
	cs.Proxied = false // its clients follow the master the sentinels name, around any proxy
	o := Options{ProxiedReplication: !spec.Needs.Netns}
	if !spec.Here() {
		cs, o = on(cs)
	}
	set, err := StartSet(ctx, env, cs, o)
	if err != nil {
		return nil, err
	}
	return &kinds.Cluster{
		Target:    Target(set),
		Nodes:     set.Nodes(),
		Processes: append(slices.Clone(set.Nodes()), set.Sentinels...),
		Dial:      set.SentinelAddrs(), Master: set.MasterName,
	}, nil
}

// Target is what the faults break of set: its Redis nodes, the master the
// sentinels report as its leader, and the set to fail over.
func Target(set *Set) nemesis.Target {
	return nemesis.Target{Nodes: kinds.AsNodes(set.Nodes()), Leader: kinds.Leads(set), Sentinel: FailoverSet{Set: set}}
}

// on is a Sentinel set on the inventory's placements (the master on the
// first, a replica on each other), with a sentinel beside each Redis
// node: at the port its entry names (Placement.PeerPorts, from
// sentinel_port) or Sentinel's 26379, in the data dir's sibling
// "<data>-sentinel".
func on(cs compose.Spec) (compose.Spec, Options) {
	cs.On = slices.Clone(cs.On)
	for i := range cs.On {
		// No proxy: its clients follow the master the sentinels name,
		// around any proxy (and a sentinel beside a node would take
		// the node's proxy port).
		cs.On[i].Proxy = nil
	}
	var o Options
	for _, p := range cs.On {
		port := 26379
		if len(p.PeerPorts) > 0 && p.PeerPorts[0] != 0 {
			port = p.PeerPorts[0]
		}
		p.Port, p.PeerPorts, p.Dir = port, nil, p.Dir+"-sentinel"
		o.SentinelsOn = append(o.SentinelsOn, p)
	}
	return cs, o
}

// FailoverSet is a Sentinel set as the failover fault breaks it
// (nemesis.FailoverSet): its controls name compose's nodes, which it
// gives the nemesis as nemesis.Nodes. It is comparable: two wrap the same
// set when they are equal.
type FailoverSet struct{ Set *Set }

// CurrentMaster returns the address of the master the sentinels report.
func (x FailoverSet) CurrentMaster(ctx context.Context) (string, error) {
	return x.Set.CurrentMaster(ctx)
}

// AwaitNewMaster waits until the sentinels report a master other than old.
func (x FailoverSet) AwaitNewMaster(ctx context.Context, old string) (string, error) {
	return x.Set.AwaitNewMaster(ctx, old)
}

// SetDownAfter sets the sentinels' down-after-milliseconds.
func (x FailoverSet) SetDownAfter(ctx context.Context, d time.Duration) error {
	return x.Set.SetDownAfter(ctx, d)
}

// Node returns the set's node (or sentinel) at addr, or nil.
func (x FailoverSet) Node(addr string) nemesis.Node { return kinds.AsNode(x.Set.Node(addr)) }

// ReplicationLinks are the replicas' replication links (see
// Set.ReplicationLinks).
func (x FailoverSet) ReplicationLinks() []nemesis.Link {
	out := make([]nemesis.Link, len(x.Set.ReplicationLinks))
	for i, l := range x.Set.ReplicationLinks {
		out[i] = l
	}
	return out
}

// Side says where the sentinels sit relative to a cut of a node's clients.
func (x FailoverSet) Side() string { return x.Set.SentinelsSide }
