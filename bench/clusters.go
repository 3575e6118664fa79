package bench

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/rueidislock"
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
}

// ParseBackend parses a backend spec. The name must be registered.
func ParseBackend(spec string) (Backend, error) {
	name, query, _ := strings.Cut(spec, "?")
	b := Backend{Spec: spec, Name: name, Params: map[string]string{}}
	if !slices.Contains(backends.Names(), name) {
		return b, fmt.Errorf("backend %q: unknown (registered: %s)", name, strings.Join(backends.Names(), ", "))
	}
	if query != "" {
		v, err := url.ParseQuery(query)
		if err != nil {
			return b, fmt.Errorf("backend %q: params: %w", spec, err)
		}
		for k, vs := range v {
			b.Params[k] = vs[len(vs)-1]
		}
	}
	return b, nil
}

// topology is the kind of cluster a backend runs on.
type topology string

const (
	noServers  topology = "none"
	redisOne   topology = "redis×1"
	redisFive  topology = "redis×5"
	sentinelRS topology = "sentinel"
	zkThree    topology = "zookeeper×3"
	etcdThree  topology = "etcd×3"
	pgOne      topology = "postgres×1"
)

// topologies says which cluster each backend needs.
var topologies = map[string]topology{
	"noop":      noServers,
	"redis":     redisOne,
	"redlock":   redisFive,
	"redsync":   redisFive,
	"sentinel":  sentinelRS,
	"zookeeper": zkThree,
	"etcd":      etcdThree,
	// rueidislock runs on the redis backend's server: compared on the
	// same node.
	"rueidislock": redisOne,
	"postgres":    pgOne,
}

// Listed are the backends `lockbench backends` describes: every
// registered one, and the variants whose guarantee differs from their
// default's (postgres's advisory mode: no TTL on the server, no fencing).
func Listed(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n)
		if n == "postgres" {
			out = append(out, "postgres?mode=advisory")
		}
	}
	return out
}

// Shape is the shape of the cluster a backend runs on, for telling which
// faults apply before any server starts; ok is false for a backend
// lockbench does not start servers for.
func Shape(b Backend) (nemesis.Shape, bool) {
	t, ok := topologies[b.Name]
	if !ok {
		return nemesis.Shape{}, false
	}
	switch t {
	case redisOne:
		return nemesis.Shape{RedisNodes: 1}, true
	case redisFive:
		return nemesis.Shape{RedisNodes: 5}, true
	case sentinelRS:
		return nemesis.Shape{Sentinel: true}, true
	case zkThree, etcdThree:
		return nemesis.Shape{QuorumNodes: 3, PeerNetwork: peerNetwork() == nil}, true
	case pgOne:
		return nemesis.Shape{Postgres: true}, true
	}
	return nemesis.Shape{}, true
}

// Clusters starts, on first use, the servers a plan's backends need, all
// behind proxies (a case that does not need them bypasses them), one set
// per durability profile, and keeps them for the whole run. External
// endpoints given by the user replace a backend's cluster: faults that
// need compose are then skipped.
type Clusters struct {
	env      *compose.Env
	external map[string]backends.Config

	mu  sync.Mutex
	set map[profile]*cluster
	// admittedExt: the external redlock nodes were bootstrapped (see
	// admit).
	admittedExt bool
}

// profile names one cluster: a topology under a durability profile.
type profile struct {
	topo    topology
	durable bool
}

// cluster is the servers of one profile.
type cluster struct {
	redis []*compose.Node
	// admitted holds the process ids of the five Redis nodes when
	// Redlock's Bootstrap admitted them (see admit).
	admitted []int
	sentinel *compose.SentinelSet
	// spent: the Sentinel set was given to a Fresh scenario, which left it
	// changed (a promoted replica, a dead master): nobody gets it again.
	spent bool
	zk    *compose.Ensemble
	etcd  *compose.EtcdCluster
	pg    *compose.Node
}

// NewClusters returns clusters that start their servers in env. external
// maps a backend name to the endpoints to use instead.
func NewClusters(env *compose.Env, external map[string]backends.Config) *Clusters {
	return &Clusters{env: env, external: external, set: map[profile]*cluster{}}
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
	cfg := backends.Config{Params: map[string]string{}}
	for k, v := range b.Params {
		cfg.Params[k] = v
	}
	if ext, ok := c.external[b.Name]; ok {
		cfg.Addrs, cfg.Username, cfg.Password, cfg.TLS, cfg.TLSFiles = ext.Addrs, ext.Username, ext.Password, ext.TLS, ext.TLSFiles
		if b.Name == "redlock" {
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.admittedExt {
				if err := admit(cfg); err != nil {
					return nemesis.Target{}, cfg, err
				}
				c.admittedExt = true
			}
		}
		return nemesis.Target{}, cfg, nil
	}
	topo, ok := topologies[b.Name]
	if !ok {
		return nemesis.Target{}, cfg, fmt.Errorf("backend %s: lockbench does not know which servers it needs; give its addresses", b.Name)
	}
	durable := durability == results.DurabilityDurable
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.set[profile{topo, durable}]
	if cl == nil {
		cl = &cluster{}
		c.set[profile{topo, durable}] = cl
	}
	var t nemesis.Target
	var nodes []*compose.Node
	switch topo {
	case noServers:
		return t, cfg, nil
	case redisOne, redisFive:
		if b.Name == "redlock" && cl.redis != nil && topo == redisFive && restarted(cl.redis, cl.admitted) {
			// A node restarted (a restart or crash fault, repaired): Redlock
			// keeps it out of the quorum for a max TTL after a client
			// notices. Rather than let the next case start inside that
			// quarantine, it gets new nodes.
			stop(cl.redis)
			cl.redis = nil
		}
		if cl.redis == nil {
			n := map[topology]int{redisOne: 1, redisFive: 5}[topo]
			started, err := c.env.Redis(ctx, n, compose.RedisOptions{Proxied: true, AOF: durable})
			if err != nil {
				return t, cfg, err
			}
			cl.redis = started
			if topo == redisFive {
				if err := cl.admit(started); err != nil {
					return t, cfg, err
				}
			}
		}
		t.Redis, nodes = cl.redis, cl.redis
		if b.Name == "redlock" {
			t.Priority = []int{0} // the first node of its queue majority
		}
	case sentinelRS:
		if cl.sentinel == nil || f.Fresh || cl.spent {
			set, err := c.env.Sentinel(ctx, compose.SentinelOptions{ProxiedReplication: true, AOF: durable})
			if err != nil {
				return t, cfg, err
			}
			if cl.sentinel != nil {
				stop(cl.sentinel.Nodes())
			}
			cl.sentinel = set
		}
		cl.spent = f.Fresh
		t.Sentinel = cl.sentinel
		cfg.Addrs = cl.sentinel.SentinelAddrs()
		cfg.Params["master"] = cl.sentinel.MasterName
		return t, cfg, nil
	case zkThree:
		if cl.zk == nil {
			e, err := c.env.ZooKeeper(ctx, 3, compose.ZooKeeperOptions{Proxied: true, NoFsync: !durable, PeerNetwork: peerNetwork() == nil})
			if err != nil {
				return t, cfg, err
			}
			cl.zk = e
		}
		t.ZooKeeper, nodes, t.PeerNetwork = cl.zk, cl.zk.Nodes, peerNetwork() == nil
	case etcdThree:
		if cl.etcd == nil {
			e, err := c.env.Etcd(ctx, 3, compose.EtcdOptions{Proxied: true, NoFsync: !durable, PeerNetwork: peerNetwork() == nil})
			if err != nil {
				return t, cfg, err
			}
			cl.etcd = e
		}
		t.Etcd, nodes, t.PeerNetwork = cl.etcd, cl.etcd.Nodes, peerNetwork() == nil
	case pgOne:
		if cl.pg == nil {
			n, err := c.env.Postgres(ctx, compose.PostgresOptions{Proxied: true, NoFsync: !durable})
			if err != nil {
				return t, cfg, err
			}
			cl.pg = n
		}
		t.Postgres, nodes = cl.pg, []*compose.Node{cl.pg}
	}
	for _, n := range nodes {
		if f.Proxied {
			cfg.Addrs = append(cfg.Addrs, n.Addr())
		} else {
			cfg.Addrs = append(cfg.Addrs, n.ServerAddr())
		}
	}
	return t, cfg, nil
}

// peerNetwork says whether quorum clusters can run with their members in
// network namespaces of their own (compose.PeerNetworkAvailable), so that
// faults can cut them apart; asked once per process.
var peerNetwork = sync.OnceValue(compose.PeerNetworkAvailable)

// Lease is how long backend b keeps the key of a holder that went silent,
// for a lease of ttl: the TTL as the backend rounds it (etcd counts
// seconds), or the session timeout when that is longer (ZooKeeper, whose
// session the runner sets to the TTL, at least zkMinSession, unless b's
// params say otherwise).
// Client pauses are sized from it.
func Lease(b Backend, ttl time.Duration) time.Duration {
	switch b.Name {
	case "etcd":
		return (ttl + time.Second - 1) / time.Second * time.Second
	case "zookeeper":
		if d, err := time.ParseDuration(b.Params["session"]); err == nil {
			return max(ttl, d)
		}
		return max(ttl, zkMinSession)
	}
	return ttl
}

// KeyLife is how long backend b's keys live on its servers after the
// holder's last request, for a lease of ttl: the lease, but for
// rueidislock, whose keys are kept its validity ahead (default 5 s) of
// the leases it promises.
func KeyLife(b Backend, ttl time.Duration) time.Duration {
	if b.Name == "rueidislock" {
		if d, err := time.ParseDuration(b.Params["validity"]); err == nil {
			return max(ttl, d)
		}
		return max(ttl, rueidislock.DefaultKeyValidity)
	}
	return Lease(b, ttl)
}

// Repair brings every node of t back: started, resumed, reachable. A
// nemesis heals what it broke; this is the safety net between cases.
func Repair(ctx context.Context, t nemesis.Target) error {
	var nodes []*compose.Node
	nodes = append(nodes, t.Redis...)
	if t.Sentinel != nil {
		nodes = append(nodes, t.Sentinel.Nodes()...)
	}
	if t.ZooKeeper != nil {
		nodes = append(nodes, t.ZooKeeper.Nodes...)
	}
	if t.Etcd != nil {
		nodes = append(nodes, t.Etcd.Nodes...)
	}
	if t.Postgres != nil {
		nodes = append(nodes, t.Postgres)
	}
	for _, n := range nodes {
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

// admit lets Redlock's clients use new nodes at once (redlock.Bootstrap,
// through the registry's bootstrap param, in this one call), instead of
// each node serving a quarantine of one max TTL after the first client
// finds it. It runs once per cluster, when the runner creates it; the
// clients of every case (separate processes) open Redlock without it.
func (c *cluster) admit(nodes []*compose.Node) error {
	if !slices.Contains(backends.Names(), "redlock") {
		return nil
	}
	cfg := backends.Config{Params: map[string]string{}}
	for _, n := range nodes {
		cfg.Addrs = append(cfg.Addrs, n.ServerAddr())
	}
	if err := admit(cfg); err != nil {
		return err
	}
	c.admitted = pids(nodes)
	return nil
}

// admit opens Redlock with cfg's nodes, asking it to bootstrap them,
// forced: the runner has just started them, so they are new although
// they have been up for less than the max TTL (it admits nothing on nodes
// already in use), and closes it.
func admit(cfg backends.Config) error {
	params := map[string]string{"bootstrap": "force"}
	for k, v := range cfg.Params {
		if k == "quarantine" || k == "maxttl" {
			params[k] = v
		}
	}
	cfg.Params = params
	l, err := backends.Open("redlock", cfg)
	if err != nil {
		return fmt.Errorf("admit the Redlock nodes: %w", err)
	}
	return l.Close()
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

// Topologies lists the clusters the backends need, for the CLI's summary.
func Topologies(bs []Backend) []string {
	seen := map[topology]bool{}
	var out []string
	for _, b := range bs {
		t, ok := topologies[b.Name]
		if ok && t != noServers && !seen[t] {
			seen[t] = true
			out = append(out, string(t))
		}
	}
	sort.Strings(out)
	return out
}
