package bench

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
)

// Backend is one backend of a plan: a registered name and its params,
// written on the command line as name or name?param=value&param=value
// (for example redlock?quarantine=false).
type Backend struct {
	// Spec is the backend as written; results and reports name it so.
	Spec   string
	Name   string
	Params map[string]string
	// Descriptor is what the backend registered: everything the runner
	// knows of it.
	Descriptor backends.Descriptor
}

// ParseBackend parses a backend spec. The name must be registered.
func ParseBackend(spec string) (Backend, error) {
	name, query, _ := strings.Cut(spec, "?")
	b := Backend{Spec: spec, Name: name, Params: map[string]string{}}
	d, ok := backends.Lookup(name)
	if !ok {
		return b, configErrorf("backend %q: unknown (registered: %s)", name, strings.Join(backends.Names(), ", "))
	}
	b.Descriptor = d
	if query != "" {
		v, err := url.ParseQuery(query)
		if err != nil {
			return b, configErrorf("backend %q: params: %v", spec, err)
		}
		for k, vs := range v {
			b.Params[k] = vs[len(vs)-1]
		}
	}
	return b, nil
}

// params returns the params of a case of b whose TTL is ttl: b's own,
// and those its descriptor sets for the TTL where b sets none.
func (b Backend) params(ttl time.Duration) map[string]string {
	return b.Descriptor.ParamsFor(ttl, b.Params)
}

// NotApplicable returns why fault class cannot apply to b, as b's
// descriptor says, or "" when it can.
func (b Backend) NotApplicable(class string) string {
	return b.Descriptor.NotApplicable[class]
}

// Listed are the backends `lockbench backends` describes: every
// registered one, and the variants its descriptor lists (postgres's
// advisory mode, whose guarantee differs from its default's).
func Listed() []string {
	var out []string
	for _, d := range backends.Descriptors() {
		out = append(out, d.Name)
		for _, v := range d.AllVariants() {
			if v.Listed && v.Params != "" {
				out = append(out, v.Spec(d.Name))
			}
		}
	}
	return out
}

// Shape is the shape of the servers backend b runs on, for telling which
// faults apply before any server starts: the shape of the Target that
// Clusters.Setup returns for it.
func Shape(b Backend) nemesis.Shape {
	s := b.Descriptor.Servers
	switch s.Kind {
	case backends.Redis:
		return nemesis.Shape{Nodes: s.Count, Proxied: true, ClockShift: true}
	case backends.Sentinel:
		return nemesis.Shape{Nodes: s.Count, Leader: true, Sentinel: true}
	case backends.ZooKeeper, backends.Etcd:
		return nemesis.Shape{Nodes: s.Count, Elects: true, Leader: true, Members: peerNetwork() == nil, Proxied: true}
	case backends.Postgres:
		return nemesis.Shape{Nodes: s.Count, Proxied: true}
	}
	return nemesis.Shape{}
}

// Clusters starts, on first use, the servers a plan's backends need, all
// behind proxies (a case that does not need them bypasses them), one set
// per durability profile, and keeps them for the whole run; backends
// that declare the same servers share them. External endpoints given by
// the user replace a backend's servers: faults that need compose are then
// skipped.
type Clusters struct {
	env      *compose.Env
	external map[string]backends.Config

	mu  sync.Mutex
	set map[profile]*cluster
	// admittedExt holds the backends whose external servers were admitted
	// (Descriptor.Admit).
	admittedExt map[string]bool
	// retired holds the nodes of the clusters Lost retired: nothing
	// repairs them.
	retired map[*compose.Node]bool
}

// profile names one cluster: servers under a durability profile.
type profile struct {
	servers backends.Servers
	durable bool
}

// cluster is the servers of one profile.
type cluster struct {
	nodes []*compose.Node
	// admitted holds the process ids of nodes when they were admitted
	// (Descriptor.Admit).
	admitted []int
	sentinel *compose.SentinelSet
	// spent: the Sentinel set was given to a Fresh scenario, which left it
	// changed (a promoted replica, a dead master): nobody gets it again.
	spent bool
	zk    *compose.Ensemble
	etcd  *compose.EtcdCluster
}

// NewClusters returns clusters that start their servers in env. external
// maps a backend name to the endpoints to use instead.
func NewClusters(env *compose.Env, external map[string]backends.Config) *Clusters {
	return &Clusters{env: env, external: external, set: map[profile]*cluster{}, admittedExt: map[string]bool{}, retired: map[*compose.Node]bool{}}
}

// External reports whether backend name runs on the user's endpoints.
func (c *Clusters) External(name string) bool {
	_, ok := c.external[name]
	return ok
}

// Setup returns the fault target and the backend config for a case of b
// under fault f, on servers of the durability profile (results'
// DurabilityFast or DurabilityDurable).
func (c *Clusters) Setup(ctx context.Context, b Backend, f nemesis.Fault, durability string) (nemesis.Target, backends.Config, error) {
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
	durable := durability == results.DurabilityDurable
	c.mu.Lock()
	defer c.mu.Unlock()
	key := profile{d.Servers, durable}
	cl := c.set[key]
	if cl == nil {
		cl = &cluster{}
		c.set[key] = cl
	}
	t, err := c.start(ctx, cl, d, f, durable)
	if err != nil {
		return t, cfg, err
	}
	t.Priority = d.Priority
	if d.Probe != nil {
		t.Probe = func(ctx context.Context, n *compose.Node, substr string) (nemesis.Stored, error) {
			return d.Probe(ctx, backends.Config{Addrs: []string{n.ServerAddr()}, Params: cfg.Params}, substr)
		}
	}
	if d.Servers.Kind == backends.Sentinel {
		// The clients ask the sentinels for the master, by its name.
		cfg.Addrs = cl.sentinel.SentinelAddrs()
		if d.Servers.MasterParam != "" {
			cfg.Params[d.Servers.MasterParam] = cl.sentinel.MasterName
		}
		return t, cfg, nil
	}
	for _, n := range t.Nodes {
		if f.Proxied {
			cfg.Addrs = append(cfg.Addrs, n.Addr())
		} else {
			cfg.Addrs = append(cfg.Addrs, n.ServerAddr())
		}
	}
	return t, cfg, nil
}

// start starts cl's servers for backend d if they are not running (or no
// longer fit for its case) and returns them as a fault target.
func (c *Clusters) start(ctx context.Context, cl *cluster, d backends.Descriptor, f nemesis.Fault, durable bool) (nemesis.Target, error) {
	s := d.Servers
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
			started, err := c.env.Redis(ctx, s.Count, compose.RedisOptions{Proxied: true, AOF: durable})
			if err != nil {
				return nemesis.Target{}, err
			}
			cl.nodes = started
			if err := cl.admit(s, started); err != nil {
				return nemesis.Target{}, err
			}
		}
		return nemesis.Target{Nodes: cl.nodes, ClockShift: true}, nil
	case backends.Sentinel:
		if cl.sentinel == nil || f.Fresh || cl.spent {
			set, err := c.env.Sentinel(ctx, compose.SentinelOptions{Replicas: s.Count - 1, ProxiedReplication: true, AOF: durable})
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
		peers := peerNetwork() == nil
		if cl.zk == nil {
			e, err := c.env.ZooKeeper(ctx, s.Count, compose.ZooKeeperOptions{Proxied: true, NoFsync: !durable, PeerNetwork: peers})
			if err != nil {
				return nemesis.Target{}, err
			}
			cl.zk = e
		}
		t := nemesis.Target{Nodes: cl.zk.Nodes, Leader: cl.zk, Elects: true}
		if peers {
			t.Members = cl.zk
		}
		return t, nil
	case backends.Etcd:
		peers := peerNetwork() == nil
		if cl.etcd == nil {
			e, err := c.env.Etcd(ctx, s.Count, compose.EtcdOptions{Proxied: true, NoFsync: !durable, PeerNetwork: peers})
			if err != nil {
				return nemesis.Target{}, err
			}
			cl.etcd = e
		}
		t := nemesis.Target{Nodes: cl.etcd.Nodes, Leader: cl.etcd, Elects: true}
		if peers {
			t.Members = cl.etcd
		}
		return t, nil
	case backends.Postgres:
		if s.Count != 1 {
			return nemesis.Target{}, configErrorf("backend %s: %d PostgreSQL servers: lockbench starts one", d.Name, s.Count)
		}
		if cl.nodes == nil {
			n, err := c.env.Postgres(ctx, compose.PostgresOptions{Proxied: true, NoFsync: !durable})
			if err != nil {
				return nemesis.Target{}, err
			}
			cl.nodes = []*compose.Node{n}
		}
		return nemesis.Target{Nodes: cl.nodes, KeepsData: true}, nil
	}
	return nemesis.Target{}, fmt.Errorf("backend %s: lockbench does not start %q servers; give their addresses", d.Name, s.Kind)
}

// Lost retires the servers backend b ran on under the durability
// profile: a fault left them lost (a consensus majority that lost its
// data), so the next case that needs them gets new ones.
func (c *Clusters) Lost(b Backend, durability string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := profile{b.Descriptor.Servers, durability == results.DurabilityDurable}
	if cl := c.set[key]; cl != nil {
		for _, n := range cl.all() {
			c.retired[n] = true
		}
		stop(cl.all())
		delete(c.set, key)
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

// peerNetwork says whether quorum clusters can run with their members in
// network namespaces of their own (compose.PeerNetworkAvailable), so that
// faults can cut them apart; asked once per process.
var peerNetwork = sync.OnceValue(compose.PeerNetworkAvailable)

// Lease is how long backend b keeps the key of a holder that went silent,
// for a lease of ttl, with the params a case of that TTL gives it (see
// backends.Descriptor.Lease). Client pauses are sized from it.
func Lease(b Backend, ttl time.Duration) time.Duration {
	return b.Descriptor.LeaseOf(ttl, b.params(ttl))
}

// KeyLife is how long backend b's keys live on its servers after the
// holder's last request, for a lease of ttl (see
// backends.Descriptor.KeyLife). Clock jumps are sized from it.
func KeyLife(b Backend, ttl time.Duration) time.Duration {
	return b.Descriptor.KeyLifeOf(ttl, b.params(ttl))
}

// Repair brings every node of t back: started, resumed, reachable. A
// nemesis heals what it broke; this is the safety net between cases. The
// nodes of a cluster that Lost retired stay down.
func (c *Clusters) Repair(ctx context.Context, t nemesis.Target) error {
	for _, n := range t.Nodes {
		c.mu.Lock()
		retired := c.retired[n]
		c.mu.Unlock()
		if retired {
			continue
		}
		if n.Paused() {
			if err := n.Resume(); err != nil {
				return err
			}
		}
		if p := n.Proxy(); p != nil {
			if err := p.Heal(); err != nil {
				return err
			}
		}
		if !n.Running() {
			if err := n.Start(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// admit runs, on nodes just created for servers s, the Admit of every
// backend that declares s (Redlock's admission of new nodes), once, and
// notes the nodes' processes it admitted.
func (cl *cluster) admit(s backends.Servers, nodes []*compose.Node) error {
	cfg := backends.Config{Params: map[string]string{}}
	for _, n := range nodes {
		cfg.Addrs = append(cfg.Addrs, n.ServerAddr())
	}
	admitted := false
	for _, d := range backends.Descriptors() {
		if d.Servers != s || d.Admit == nil {
			continue
		}
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
// a failover), to keep the machine's load down.
func stop(nodes []*compose.Node) {
	for _, n := range nodes {
		_ = n.Kill()
	}
}
