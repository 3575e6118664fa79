package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
)

// Clusters starts, on first use, the servers a plan's backends need, all
// behind proxies (a case that does not need them bypasses them), under
// the durability profile of the case and with what its fault needs (a
// lazy filesystem for a power loss, the clock preload for a clock fault,
// network namespaces for a partition): a lazy filesystem slows every
// write and the preload every clock read, so no other case runs on such
// servers. Backends that declare the same servers share them; one set of
// each is kept at a time, and replaced when a case needs another profile.
// External endpoints given by the user replace a backend's servers:
// faults that need compose are then skipped.
type Clusters struct {
	env      *compose.Env
	external map[string]backends.Config

	mu  sync.Mutex
	set map[backends.Servers]*cluster
	// admittedExt holds the backends whose external servers were admitted
	// (Descriptor.Admit).
	admittedExt map[string]bool
	// retired holds the nodes of the clusters Lost retired: nothing
	// repairs them.
	retired map[*compose.Node]bool
	// hosts, when set, places the servers of the backends its inventory
	// lists on their hosts (see OnHosts); placed holds them by backend.
	hosts  *Hosts
	placed map[string]*cluster
}

// profile is what one set of servers is started with.
type profile struct {
	durability compose.Durability
	needs      nemesis.Needs
}

// cluster is the servers of one profile.
type cluster struct {
	profile profile
	nodes   []*compose.Node
	// admitted holds the process ids of nodes when they were admitted
	// (Descriptor.Admit).
	admitted []int
	sentinel *compose.SentinelSet
	// spent: the Sentinel set was given to a Fresh scenario, which left it
	// changed (a promoted replica, a dead master): nobody gets it again.
	spent bool
	zk    *compose.Ensemble
	etcd  *compose.EtcdCluster
	// target is the fault target of servers placed on hosts.
	target nemesis.Target
}

// NewClusters returns clusters that start their servers in env. external
// maps a backend name to the endpoints to use instead.
func NewClusters(env *compose.Env, external map[string]backends.Config) *Clusters {
	return &Clusters{env: env, external: external, set: map[backends.Servers]*cluster{}, admittedExt: map[string]bool{}, retired: map[*compose.Node]bool{}}
}

// External reports whether backend name runs on the user's endpoints.
func (c *Clusters) External(name string) bool {
	_, ok := c.external[name]
	return ok
}

// Setup returns the fault target and the backend config for a case of b
// under fault f, on servers of the durability profile (results'
// DurabilityFast, DurabilityPeriodic or DurabilityDurable), for leases of
// ttl: servers it creates are admitted (Descriptor.Admit) with the params
// of a case of that TTL, so that Redlock's admission records the case's
// max TTL rather than the library's default minute, which would make a
// node that lost its data sit out a minute instead of one TTL.
func (c *Clusters) Setup(ctx context.Context, b Backend, f nemesis.Fault, durability string, ttl time.Duration) (nemesis.Target, backends.Config, error) {
	d := b.Descriptor
	cfg := backends.Config{Params: map[string]string{}}
	for k, v := range b.Params {
		cfg.Params[k] = v
	}
	if ext, ok := c.external[b.Name]; ok {
		cfg.Addrs, cfg.Username, cfg.Password, cfg.TLS, cfg.TLSFiles = ext.Addrs, ext.Username, ext.Password, ext.TLS, ext.TLSFiles
		for k, v := range ext.Params {
			if _, set := cfg.Params[k]; !set {
				cfg.Params[k] = v
			}
		}
		if d.Admit != nil {
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.admittedExt[b.Name] {
				if err := d.Admit(cfg, false); err != nil {
					return nemesis.Target{}, cfg, err
				}
				c.admittedExt[b.Name] = true
			}
		}
		return nemesis.Target{}, cfg, nil
	}
	if d.Servers.Kind == backends.NoServers {
		return nemesis.Target{}, cfg, nil
	}
	prof, err := profileOf(durability, f)
	if err != nil {
		return nemesis.Target{}, cfg, err
	}
	if err := offers(b, prof.needs); err != nil {
		return nemesis.Target{}, cfg, err
	}
	if k := d.Servers.Kind; k == backends.ZooKeeper || k == backends.Etcd {
		// Their members always sit in network namespaces of their own
		// (PeerNetwork) when the host allows it.
		prof.needs.Netns = false
	}
	if c.hosts != nil {
		t, err := c.onHosts(ctx, b, prof, f.Fresh, ttl)
		if err != nil {
			return t, cfg, err
		}
		t.Priority, t.Probe, t.Why = d.Priority, probe(d, cfg), Shape(b).Why
		if t.Sentinel != nil {
			return t, sentinelConfig(cfg, d, t.Sentinel), nil
		}
		cfg.Addrs = clientAddrs(t, f)
		return t, cfg, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.set[d.Servers]
	if cl != nil && cl.profile != prof {
		stop(cl.all())
		cl = nil
	}
	if cl == nil {
		cl = &cluster{profile: prof}
		c.set[d.Servers] = cl
	}
	t, err := c.start(ctx, cl, d, f, ttl)
	if err != nil {
		return t, cfg, err
	}
	t.Priority, t.Probe, t.Why = d.Priority, probe(d, cfg), Shape(b).Why
	if d.Servers.Kind == backends.Sentinel {
		return t, sentinelConfig(cfg, d, cl.sentinel), nil
	}
	cfg.Addrs = clientAddrs(t, f)
	return t, cfg, nil
}

// offers returns nil if backend b's servers can be started with what
// needs asks (a lazy filesystem, the clock preload, network namespaces),
// or an error with their kind's reason that they cannot (an etcd member
// takes no clock preload).
func offers(b Backend, needs nemesis.Needs) error {
	k, err := kinds.Lookup(b.Descriptor.Servers.Kind)
	if err != nil {
		return fmt.Errorf("backend %s: %w", b.Name, err)
	}
	o := k.Offers(b.Descriptor.Servers.Count)
	for c, need := range map[nemesis.Capability]bool{nemesis.LosableData: needs.LazyFS, nemesis.MovableClock: needs.FakeClock, nemesis.ClientLinks: needs.Netns} {
		if need && o.Caps&c == 0 {
			why := o.Why[c]
			if why == "" {
				why = c.Takes()
			}
			return configErrorf("backend %s: its servers cannot be started with %v: %s", b.Name, c, why)
		}
	}
	return nil
}

// clientAddrs are the addresses the clients of a case under fault f dial:
// each node's proxy when f works through the proxies, the servers
// themselves otherwise (a proxy costs a hop the other faults do not need).
func clientAddrs(t nemesis.Target, f nemesis.Fault) []string {
	var out []string
	for _, n := range t.Nodes {
		if f.Proxied {
			out = append(out, n.Addr())
		} else {
			out = append(out, n.ServerAddr())
		}
	}
	return out
}

// sentinelConfig is cfg for backend d on Sentinel set s: the clients ask
// its sentinels for the master, by its name.
func sentinelConfig(cfg backends.Config, d backends.Descriptor, s *compose.SentinelSet) backends.Config {
	cfg.Addrs = s.SentinelAddrs()
	if d.Servers.MasterParam != "" {
		cfg.Params[d.Servers.MasterParam] = s.MasterName
	}
	return cfg
}

// probe reads what one node holds of a case's keys through backend d's
// Probe, or is nil when d has none.
func probe(d backends.Descriptor, cfg backends.Config) func(context.Context, *compose.Node, string) (nemesis.Stored, error) {
	if d.Probe == nil {
		return nil
	}
	return func(ctx context.Context, n *compose.Node, substr string) (nemesis.Stored, error) {
		return d.Probe(ctx, backends.Config{Addrs: []string{n.ServerAddr()}, Params: cfg.Params}, substr)
	}
}

// profileOf is the profile of the servers of a case under fault f (fast
// when durability is empty).
func profileOf(durability string, f nemesis.Fault) (profile, error) {
	if durability == "" {
		durability = results.DurabilityFast
	}
	d, err := compose.ParseDurability(durability)
	if err != nil {
		return profile{}, configErrorf("durability %q: want %s, %s or %s", durability, results.DurabilityFast, results.DurabilityPeriodic, results.DurabilityDurable)
	}
	var needs nemesis.Needs
	if f.Scenario != nil {
		needs = f.Needs
	}
	return profile{durability: d, needs: needs}, nil
}

// start starts cl's servers for backend d if they are not running (or no
// longer fit for its case) and returns them as a fault target.
func (c *Clusters) start(ctx context.Context, cl *cluster, d backends.Descriptor, f nemesis.Fault, ttl time.Duration) (nemesis.Target, error) {
	s, p := d.Servers, cl.profile
	switch s.Kind {
	case backends.Redis:
		if cl.nodes != nil && d.Admit != nil && restarted(cl.nodes, cl.admitted) {
			// A node restarted (a restart or crash fault, repaired): a
			// backend that admits its nodes (Redlock) would keep it out of
			// its quorum until it served a quarantine. Rather than let the
			// next case start inside it, it gets new nodes.
			stop(cl.nodes)
			cl.nodes = nil
		}
		if cl.nodes == nil {
			started, err := c.env.Redis(ctx, s.Count, compose.RedisOptions{Proxied: true, Durability: p.durability,
				LazyFS: p.needs.LazyFS, FakeClock: p.needs.FakeClock, Netns: p.needs.Netns})
			if err != nil {
				return nemesis.Target{}, err
			}
			cl.nodes = started
			if err := cl.admit(s, started, ttl); err != nil {
				return nemesis.Target{}, err
			}
		}
		return nemesis.Target{Nodes: cl.nodes}, nil
	case backends.Sentinel:
		if cl.sentinel == nil || f.Fresh || cl.spent {
			// Replication runs through proxies on this host, which the
			// failover fault holds back, but for a set in network
			// namespaces: a cut of the master's clients would take those
			// proxies in, and with them the replication a real partition
			// of the clients leaves up.
			set, err := c.env.Sentinel(ctx, compose.SentinelOptions{Replicas: s.Count - 1, ProxiedReplication: !p.needs.Netns, Durability: p.durability,
				LazyFS: p.needs.LazyFS, FakeClock: p.needs.FakeClock, Netns: p.needs.Netns})
			if err != nil {
				return nemesis.Target{}, err
			}
			if cl.sentinel != nil {
				stop(cl.sentinel.Nodes())
			}
			cl.sentinel = set
		}
		cl.spent = f.Fresh
		return nemesis.Target{Nodes: cl.sentinel.Nodes(), Leader: cl.sentinel, Sentinel: cl.sentinel}, nil
	case backends.ZooKeeper:
		peers := kinds.Available()[nemesis.PeerLinks] == nil
		if cl.zk == nil {
			e, err := c.env.ZooKeeper(ctx, s.Count, compose.ZooKeeperOptions{Proxied: true, Durability: p.durability, PeerNetwork: peers,
				LazyFS: p.needs.LazyFS, FakeClock: p.needs.FakeClock})
			if err != nil {
				return nemesis.Target{}, err
			}
			cl.zk = e
		}
		return electing(cl.zk.Nodes, cl.zk, peers), nil
	case backends.Etcd:
		peers := kinds.Available()[nemesis.PeerLinks] == nil
		if cl.etcd == nil {
			e, err := c.env.Etcd(ctx, s.Count, compose.EtcdOptions{Proxied: true, Durability: p.durability, PeerNetwork: peers, LazyFS: p.needs.LazyFS})
			if err != nil {
				return nemesis.Target{}, err
			}
			cl.etcd = e
		}
		return electing(cl.etcd.Nodes, cl.etcd, peers), nil
	case backends.Postgres:
		if s.Count != 1 {
			return nemesis.Target{}, configErrorf("backend %s: %d PostgreSQL servers: lockbench starts one", d.Name, s.Count)
		}
		if cl.nodes == nil {
			n, err := c.env.Postgres(ctx, compose.PostgresOptions{Proxied: true, Durability: p.durability,
				LazyFS: p.needs.LazyFS, FakeClock: p.needs.FakeClock, Netns: p.needs.Netns})
			if err != nil {
				return nemesis.Target{}, err
			}
			cl.nodes = []*compose.Node{n}
		}
		return nemesis.Target{Nodes: cl.nodes}, nil
	}
	return nemesis.Target{}, fmt.Errorf("backend %s: lockbench does not start %q servers; give their addresses", d.Name, s.Kind)
}

// Lost retires the servers backend b ran on: a fault left them lost (a
// consensus majority that lost its data), so the next case that needs
// them gets new ones.
func (c *Clusters) Lost(b Backend) {
	c.mu.Lock()
	cl := c.set[b.Descriptor.Servers]
	c.mu.Unlock()
	if cl != nil {
		c.retire(cl.all())
	}
}

// all returns every node of cl.
func (cl *cluster) all() []*compose.Node {
	nodes := slices.Clone(cl.nodes)
	if cl.sentinel != nil {
		nodes = append(nodes, cl.sentinel.Nodes()...)
	}
	if cl.zk != nil {
		nodes = append(nodes, cl.zk.Nodes...)
	}
	if cl.etcd != nil {
		nodes = append(nodes, cl.etcd.Nodes...)
	}
	return nodes
}

// Repair brings every node of t back: started, resumed, reachable, its
// clock back to real time. A nemesis heals what it broke; this is the
// safety net between cases. The nodes of a cluster that Lost retired stay
// down.
func (c *Clusters) Repair(ctx context.Context, t nemesis.Target) error {
	var errs []error
	for _, n := range t.Nodes {
		c.mu.Lock()
		retired := c.retired[n]
		c.mu.Unlock()
		if retired {
			continue
		}
		if n.Paused() {
			errs = append(errs, n.Resume())
		}
		if p := n.Proxy(); p != nil {
			errs = append(errs, p.Heal())
		}
		if n.ClientsCut() {
			errs = append(errs, n.HealClients())
		}
		if n.HasFakeClock() {
			errs = append(errs, n.ResetClock())
		}
	}
	var down []*compose.Node
	c.mu.Lock()
	for _, n := range t.Nodes {
		if !n.Running() && !c.retired[n] {
			down = append(down, n)
		}
	}
	c.mu.Unlock()
	if len(down) > 0 {
		// Together: members of a quorum come back only with one another.
		errs = append(errs, compose.StartAll(ctx, down...))
	}
	err := errors.Join(errs...)
	if err != nil {
		// Servers that could not be brought back (an ensemble that did
		// not elect again in time on a busy machine) are replaced before
		// the next case rather than handed to it broken.
		c.retire(t.Nodes)
	}
	return err
}

// retire stops the set of servers that nodes belong to and forgets it, so
// that the next case that needs them gets new ones.
func (c *Clusters) retire(nodes []*compose.Node) {
	if len(nodes) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, cl := range c.set {
		all := cl.all()
		if !slices.Contains(all, nodes[0]) {
			continue
		}
		for _, n := range all {
			c.retired[n] = true
		}
		stop(all)
		delete(c.set, key)
	}
}

// admit runs, on nodes just created for servers s, the Admit of every
// backend that declares s (Redlock's admission of new nodes), once, with
// the params of a case whose TTL is ttl, and notes the nodes' processes it
// admitted.
func (cl *cluster) admit(s backends.Servers, nodes []*compose.Node, ttl time.Duration) error {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.ServerAddr())
	}
	admitted := false
	for _, d := range backends.Descriptors() {
		if d.Servers != s || d.Admit == nil {
			continue
		}
		cfg := backends.Config{Addrs: addrs, Params: d.ParamsFor(ttl, nil)}
		if err := d.Admit(cfg, true); err != nil {
			return err
		}
		admitted = true
	}
	if admitted {
		cl.admitted = pids(nodes)
	}
	return nil
}

// restarted reports whether a node's process is not the one admitted.
func restarted(nodes []*compose.Node, admitted []int) bool {
	return !slices.Equal(pids(nodes), admitted)
}

func pids(nodes []*compose.Node) []int {
	p := make([]int, len(nodes))
	for i, n := range nodes {
		p[i] = n.PID()
	}
	return p
}

// stop kills nodes that are no longer used (a Sentinel set replaced after
// a failover, servers of another profile), to keep the machine's load
// down.
func stop(nodes []*compose.Node) {
	for _, n := range nodes {
		_ = n.Kill()
	}
}

// electing is the target of a cluster whose nodes elect their leader
// among themselves (an etcd cluster, a ZooKeeper ensemble): the nemesis
// may also cut its members apart when they talk over the peer network
// (peers).
func electing(nodes []*compose.Node, q interface {
	nemesis.Leader
	nemesis.Members
}, peers bool) nemesis.Target {
	t := nemesis.Target{Nodes: nodes, Leader: q, Elects: true}
	if peers {
		t.Members = q
	}
	return t
}
