package bench

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/nemesis"
)

// OnHosts makes c start the servers of every backend that hs's inventory
// lists on their hosts — Redis, PostgreSQL, ZooKeeper, etcd and Sentinel
// sets (see onHosts for where their sentinels go); a backend it lists
// none for is refused (its servers would run here, where the client hosts
// may not reach them).
func (c *Clusters) OnHosts(hs *Hosts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hosts, c.placed = hs, map[string]*cluster{}
}

// onHosts returns backend b's servers placed on the hosts, started under
// profile prof: a set that ran under another one, whose nodes restarted
// under a backend that admits its nodes, or that a fresh scenario had
// (failover: it left a Sentinel set with a dead master, a promoted
// replica), is stopped and wiped first (its dirs and ports are the
// inventory's, and there is one of each); fresh says the caller's
// scenario is such a one, which gets a new set too, as on this machine
// (the replication links it holds back are the initial master's). Their
// data sits on a lazy filesystem when prof needs one (a power loss),
// served on each host by the lockbench binary, uploaded there for it
// (not a Sentinel set's yet).
//
// A Sentinel set's Redis nodes go where the inventory lists its servers,
// the master on the first; beside each runs a sentinel, at the entry's
// sentinel_port (26379 by default), its files in the data dir's sibling
// "<data>-sentinel".
func (c *Clusters) onHosts(ctx context.Context, b Backend, prof profile, fresh bool, ttl time.Duration) (nemesis.Target, error) {
	d := b.Descriptor
	s := d.Servers
	if !c.hosts.Serves(b.Name) {
		return nemesis.Target{}, configErrorf("backend %s: the inventory %s places no server for it", b.Name, c.hosts.inv.Path)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.placed[b.Name]
	if cl != nil && (cl.profile != prof || d.Admit != nil && restarted(cl.nodes, cl.admitted) || cl.spent || fresh) {
		for _, n := range cl.placedNodes() {
			if err := errors.Join(n.Kill(), n.Wipe()); err != nil {
				return nemesis.Target{}, err
			}
		}
		cl = nil
	}
	if cl == nil {
		pl, err := c.hosts.Placements(b.Name, s.Count)
		if err != nil {
			return nemesis.Target{}, err
		}
		cl = &cluster{profile: prof}
		clock, lazy := prof.needs.FakeClock, prof.needs.LazyFS
		if lazy {
			if err := c.hosts.provideLockbench(ctx, pl); err != nil {
				return nemesis.Target{}, err
			}
		}
		var t nemesis.Target
		switch s.Kind {
		case backends.Redis:
			cl.nodes, err = c.env.Redis(ctx, s.Count, compose.RedisOptions{Durability: prof.durability, FakeClock: clock, LazyFS: lazy, On: pl})
		case backends.Postgres:
			var n *compose.Node
			if s.Count != 1 {
				return nemesis.Target{}, configErrorf("backend %s: %d PostgreSQL servers: lockbench starts one", d.Name, s.Count)
			}
			if n, err = c.env.Postgres(ctx, compose.PostgresOptions{Durability: prof.durability, FakeClock: clock, LazyFS: lazy, On: &pl[0]}); err == nil {
				cl.nodes = []*compose.Node{n}
			}
		case backends.ZooKeeper:
			var z *compose.Ensemble
			if z, err = c.env.ZooKeeper(ctx, s.Count, compose.ZooKeeperOptions{Durability: prof.durability, FakeClock: clock, LazyFS: lazy, On: pl}); err == nil {
				cl.nodes, t = z.Nodes, quorumTarget(z.Nodes, z, z, pl)
			}
		case backends.Etcd:
			if clock {
				return nemesis.Target{}, configErrorf("backend %s: an etcd member is a Go program, which no clock preload reaches", d.Name)
			}
			var e *compose.EtcdCluster
			if err = c.hosts.provideEtcdMember(ctx, pl); err != nil {
				return nemesis.Target{}, err
			}
			if e, err = c.env.Etcd(ctx, s.Count, compose.EtcdOptions{Durability: prof.durability, LazyFS: lazy, On: pl}); err == nil {
				cl.nodes, t = e.Nodes, quorumTarget(e.Nodes, e, e, pl)
			}
		case backends.Sentinel:
			var set *compose.SentinelSet
			if set, err = c.env.Sentinel(ctx, sentinelOn(pl, prof)); err == nil {
				cl.nodes, cl.sentinel = set.Nodes(), set
				t = nemesis.Target{Leader: set, Sentinel: set}
			}
		default:
			return nemesis.Target{}, configErrorf("backend %s: lockbench places Redis, PostgreSQL, ZooKeeper, etcd and Sentinel servers on hosts (not %s)", d.Name, s.Kind)
		}
		c.hosts.started(cl.placedNodes())
		if err != nil {
			return nemesis.Target{}, err
		}
		if err := cl.admit(s, cl.nodes, ttl); err != nil {
			return nemesis.Target{}, err
		}
		t.Nodes = cl.nodes
		cl.target = t
		c.placed[b.Name] = cl
	}
	cl.spent = fresh
	return cl.target, nil
}

// placedNodes are every server process of a cluster on hosts: its nodes
// and, for a Sentinel set, its sentinels, which listen on the
// inventory's ports too.
func (cl *cluster) placedNodes() []*compose.Node {
	if cl.sentinel == nil {
		return cl.nodes
	}
	return append(slices.Clone(cl.nodes), cl.sentinel.Sentinels...)
}

// sentinelOn is a Sentinel set on the inventory's placements pl (the
// master on the first, a replica on each other), started under prof,
// with a sentinel beside each Redis node: at the port its entry names
// (Placement.PeerPorts, from sentinel_port) or Sentinel's 26379, in the
// data dir's sibling.
func sentinelOn(pl []compose.Placement, prof profile) compose.SentinelOptions {
	for i := range pl {
		// No proxy: its clients follow the master the sentinels name,
		// around any proxy (and a sentinel beside a node would take
		// the node's proxy port).
		pl[i].Proxy = nil
	}
	o := compose.SentinelOptions{Durability: prof.durability, FakeClock: prof.needs.FakeClock, LazyFS: prof.needs.LazyFS, On: pl}
	for _, p := range pl {
		port := 26379
		if len(p.PeerPorts) > 0 && p.PeerPorts[0] != 0 {
			port = p.PeerPorts[0]
		}
		p.Port, p.PeerPorts, p.Dir = port, nil, p.Dir+"-sentinel"
		o.SentinelsOn = append(o.SentinelsOn, p)
	}
	return o
}

// quorumTarget is the fault target of a quorum's members placed at pl:
// they elect their leader, and they can be cut apart (Members) when each
// has a host of its own, which rules on their hosts need.
func quorumTarget(nodes []*compose.Node, leader nemesis.Leader, members nemesis.Members, pl []compose.Placement) nemesis.Target {
	t := nemesis.Target{Nodes: nodes, Leader: leader, Elects: true}
	addrs := map[netip.Addr]bool{}
	for _, p := range pl {
		addrs[p.Addr] = true
	}
	if len(addrs) == len(pl) {
		t.Members = members
	}
	return t
}

// ServerNeeds is what a server of backend name needs on its host when a
// run over an inventory starts it there, for lockbench hosts check: the
// program it runs when the inventory names none (redis-server, java), the
// one the run uploads instead (etcd-member), the files it reads
// (ZooKeeper's jars), the account it runs as (PostgreSQL's).
func ServerNeeds(name string) inventory.Needs {
	d, ok := backends.Lookup(name)
	if !ok {
		return inventory.Needs{}
	}
	switch d.Servers.Kind {
	case backends.Redis, backends.Sentinel:
		// A sentinel on a host runs redis-server --sentinel.
		return inventory.Needs{Binary: compose.RedisServer}
	case backends.ZooKeeper:
		return inventory.Needs{Binary: compose.Java, Files: compose.ZooKeeperClasspath}
	case backends.Etcd:
		return inventory.Needs{Uploaded: "etcd-member"}
	case backends.Postgres:
		// The inventory names its postgres; it runs as PostgreSQL's own
		// account, which refuses root.
		return inventory.Needs{Account: compose.PostgresUser}
	}
	return inventory.Needs{}
}
