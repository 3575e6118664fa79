package bench

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/workloads/nemesis"
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
}

// shape is the shape of the cluster a backend runs on, for telling which
// faults apply before any server starts; ok is false for a backend
// lockbench does not start servers for.
func shape(b Backend) (nemesis.Shape, bool) {
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
		return nemesis.Shape{QuorumNodes: 3}, true
	}
	return nemesis.Shape{}, true
}

// Clusters starts, on first use, the servers a plan's backends need, all
// behind proxies (a case that does not need them bypasses them), and
// keeps them for the whole run. External endpoints given by the user
// replace a backend's cluster: faults that need compose are then skipped.
type Clusters struct {
	env      *compose.Env
	external map[string]backends.Config

	mu     sync.Mutex
	redis1 []*compose.Node
	redis5 []*compose.Node
	// admitted holds the process ids of redis5's nodes when Redlock's
	// Bootstrap admitted them; admittedExt the external redlock configs
	// bootstrapped (see admit).
	admitted    []int
	admittedExt bool
	sentinel    *compose.SentinelSet
	// spent: the Sentinel set was given to a Fresh scenario, which left it
	// changed (a promoted replica, a dead master): nobody gets it again.
	spent bool
	zk    *compose.Ensemble
	etcd  *compose.EtcdCluster
}

// NewClusters returns clusters that start their servers in env. external
// maps a backend name to the endpoints to use instead.
func NewClusters(env *compose.Env, external map[string]backends.Config) *Clusters {
	return &Clusters{env: env, external: external}
}

// Setup returns the fault target and the backend config for a case of b
// under scenario s.
func (c *Clusters) Setup(ctx context.Context, b Backend, s *nemesis.Scenario) (nemesis.Target, backends.Config, error) {
	cfg := backends.Config{Params: map[string]string{}}
	for k, v := range b.Params {
		cfg.Params[k] = v
	}
	if ext, ok := c.external[b.Name]; ok {
		cfg.Addrs, cfg.Username, cfg.Password, cfg.TLS = ext.Addrs, ext.Username, ext.Password, ext.TLS
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
	c.mu.Lock()
	defer c.mu.Unlock()
	var t nemesis.Target
	var nodes []*compose.Node
	switch topo {
	case noServers:
		return t, cfg, nil
	case redisOne, redisFive:
		n := map[topology]int{redisOne: 1, redisFive: 5}[topo]
		cached := map[topology]*[]*compose.Node{redisOne: &c.redis1, redisFive: &c.redis5}[topo]
		if b.Name == "redlock" && *cached != nil && restarted(*cached, c.admitted) {
			// A node restarted (a restart or crash fault, repaired) without
			// its data: Redlock keeps it out of the quorum for a max TTL
			// after a client notices. Rather than let the next case start
			// inside that quarantine, it gets new nodes.
			stop(*cached)
			*cached = nil
		}
		if *cached == nil {
			started, err := c.env.Redis(ctx, n, compose.RedisOptions{Proxied: true})
			if err != nil {
				return t, cfg, err
			}
			*cached = started
			if topo == redisFive {
				if err := c.admit(started); err != nil {
					return t, cfg, err
				}
			}
		}
		t.Redis, nodes = *cached, *cached
	case sentinelRS:
		if c.sentinel == nil || s.Fresh || c.spent {
			set, err := c.env.Sentinel(ctx, compose.SentinelOptions{ProxiedReplication: true})
			if err != nil {
				return t, cfg, err
			}
			if c.sentinel != nil {
				stop(c.sentinel.Nodes())
			}
			c.sentinel = set
		}
		c.spent = s.Fresh
		t.Sentinel = c.sentinel
		cfg.Addrs = c.sentinel.SentinelAddrs()
		cfg.Params["master"] = c.sentinel.MasterName
		return t, cfg, nil
	case zkThree:
		if c.zk == nil {
			e, err := c.env.ZooKeeper(ctx, 3, compose.ZooKeeperOptions{Proxied: true, NoFsync: true})
			if err != nil {
				return t, cfg, err
			}
			c.zk = e
		}
		t.ZooKeeper, nodes = c.zk, c.zk.Nodes
	case etcdThree:
		if c.etcd == nil {
			e, err := c.env.Etcd(ctx, 3, compose.EtcdOptions{Proxied: true, NoFsync: true})
			if err != nil {
				return t, cfg, err
			}
			c.etcd = e
		}
		t.Etcd, nodes = c.etcd, c.etcd.Nodes
	}
	for _, n := range nodes {
		if s.Proxied {
			cfg.Addrs = append(cfg.Addrs, n.Addr())
			t.Proxies = append(t.Proxies, n.Proxy())
		} else {
			cfg.Addrs = append(cfg.Addrs, n.ServerAddr())
		}
	}
	return t, cfg, nil
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
func (c *Clusters) admit(nodes []*compose.Node) error {
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

// admit opens Redlock with cfg's nodes, asking it to bootstrap them (it
// admits nothing on nodes already in use), and closes it.
func admit(cfg backends.Config) error {
	params := map[string]string{"bootstrap": "true"}
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
