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
// faults that need compose are then skipped. Each server kind starts its
// own (package kinds): Clusters knows none by name, and starts them on
// this machine and on an inventory's hosts (OnHosts) by one path.
type Clusters struct {
	env      *compose.Env
	external map[string]backends.Config

	mu  sync.Mutex
	set map[clusterKey]*cluster
	// admittedExt holds the backends whose external servers were admitted
	// (Descriptor.Admit).
	admittedExt map[string]bool
	// retired holds the nodes of the clusters Lost retired: nothing
	// repairs them.
	retired map[*compose.Node]bool
	// hosts, when set, places the servers of the backends its inventory
	// lists on their hosts (see OnHosts).
	hosts *Hosts
}

// clusterKey names one set of servers: those of a Servers declaration on
// this machine, or those an inventory places for one backend.
type clusterKey struct {
	servers backends.Servers
	backend string // on hosts only: the backend the inventory places them for
}

// profile is what one set of servers is started with.
type profile struct {
	durability compose.Durability
	needs      nemesis.Needs
}

// cluster is the servers of one profile.
type cluster struct {
	profile profile
	*kinds.Cluster
	// placed: its nodes run on an inventory's hosts, whose dirs and ports
	// the next set reuses, so they are wiped when it stops.
	placed bool
	// admitted holds the process ids of nodes when they were admitted
	// (Descriptor.Admit).
	admitted []int
	// spent: a Fresh scenario had the set, which it left changed (a
	// promoted replica, a dead master): nobody gets it again.
	spent bool
}

// NewClusters returns clusters that start their servers in env. external
// maps a backend name to the endpoints to use instead.
func NewClusters(env *compose.Env, external map[string]backends.Config) *Clusters {
	return &Clusters{env: env, external: external, set: map[clusterKey]*cluster{},
		admittedExt: map[string]bool{}, retired: map[*compose.Node]bool{}}
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
func (c *Clusters) Setup(ctx context.Context, b Backend, f nemesis.Fault, durability string, ttl time.Duration) (nemesis.Target,
	backends.Config, error) {
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
	k, err := kinds.Lookup(d.Servers.Kind)
	if err != nil {
		return nemesis.Target{}, cfg, fmt.Errorf("backend %s: %w", d.Name, err)
	}
	prof, err := profileOf(durability, f)
	if err != nil {
		return nemesis.Target{}, cfg, err
	}
	if prof.needs, err = offers(b, prof.needs); err != nil {
		return nemesis.Target{}, cfg, err
	}
	if k.PeerNetwork {
		// Their members always sit in network namespaces of their own
		// when the host allows it.
		prof.needs.Netns = false
	}
	cl, err := c.cluster(ctx, b, k, prof, f.Fresh, ttl)
	if err != nil {
		return nemesis.Target{}, cfg, err
	}
	t := cl.Target
	sh := Shape(b)
	t.Priority, t.Probe, t.Why = d.Priority, probe(d, cfg), sh.Why
	t.Quorum, t.ClientClock = sh.Has(nemesis.ClientQuorum), sh.Has(nemesis.ClientClock)
	cfg.Addrs = cl.Addrs(f.Proxied)
	if cl.Master != "" && d.Servers.MasterParam != "" {
		cfg.Params[d.Servers.MasterParam] = cl.Master
	}
	return t, cfg, nil
}

// cluster returns backend b's servers of kind k, started under profile
// prof: on this machine, or where the inventory places them. A set that
// ran under another profile, whose nodes restarted under a backend that
// admits its nodes (Redlock would keep a restarted node out of its quorum
// until it served a quarantine: rather than let the next case start
// inside it, it gets new nodes), or that a fresh scenario had (failover:
// it left a Sentinel set with a dead master, a promoted replica) is
// stopped first (and, on hosts, wiped: its dirs and ports are the
// inventory's, and there is one of each); fresh says the caller's
// scenario is such a one, which gets a new set too (the replication links
// it holds back are the initial master's). On hosts, the programs the
// servers need are uploaded first: the kind's (etcd-member), and the
// lockbench binary that serves a lazy filesystem when prof needs one.
func (c *Clusters) cluster(ctx context.Context, b Backend, k kinds.Kind, prof profile, fresh bool, ttl time.Duration) (*cluster, error) {
	d := b.Descriptor
	key := clusterKey{servers: d.Servers}
	if c.hosts != nil {
		if !c.hosts.Serves(b.Name) {
			return nil, configErrorf("backend %s: the inventory %s places no server for it", b.Name, c.hosts.inv.Path)
		}
		key.backend = b.Name
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.set[key]
	if cl != nil && (cl.profile != prof || d.Admit != nil && restarted(cl.Nodes, cl.admitted) || cl.spent || fresh) {
		if err := cl.stop(); err != nil {
			return nil, err
		}
		delete(c.set, key)
		cl = nil
	}
	if cl == nil {
		spec := kinds.Spec{Count: d.Servers.Count, Durability: prof.durability, Needs: prof.needs}
		if c.hosts != nil {
			pl, err := c.hosts.Placements(b.Name, d.Servers.Count)
			if err != nil {
				return nil, err
			}
			if err := c.hosts.provideFor(ctx, k, pl, prof.needs.LazyFS); err != nil {
				return nil, err
			}
			spec.On = pl
		}
		started, err := k.Start(ctx, c.env, spec)
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", d.Name, err)
		}
		cl = &cluster{profile: prof, Cluster: started, placed: !spec.Here()}
		if c.hosts != nil {
			c.hosts.started(cl.Processes)
		}
		c.set[key] = cl
		if err := cl.admit(d.Servers, cl.Nodes, ttl); err != nil {
			return nil, err
		}
	}
	cl.spent = fresh
	return cl, nil
}

// stop kills every process of cl and, on hosts, wipes their data dirs.
func (cl *cluster) stop() error {
	if !cl.placed {
		stop(cl.Processes)
		return nil
	}
	for _, n := range cl.Processes {
		if err := errors.Join(n.Kill(), n.Wipe()); err != nil {
			return err
		}
	}
	return nil
}

// offers returns nil if backend b's servers can be started with what
// needs asks (a lazy filesystem, the clock preload, network namespaces),
// or an error with their kind's reason that they cannot (an etcd member
// takes no clock preload). It returns needs as the servers start with
// them: for Optional needs, only what the kind offers.
func offers(b Backend, needs nemesis.Needs) (nemesis.Needs, error) {
	k, err := kinds.Lookup(b.Descriptor.Servers.Kind)
	if err != nil {
		return needs, fmt.Errorf("backend %s: %w", b.Name, err)
	}
	o := k.Offers(b.Descriptor.Servers.Count)
	asked := map[nemesis.Capability]bool{
		nemesis.LosableData: needs.LazyFS, nemesis.MovableClock: needs.FakeClock, nemesis.ClientLinks: needs.Netns,
	}
	if needs.Optional {
		needs.LazyFS = needs.LazyFS && o.Caps&nemesis.LosableData != 0
		needs.FakeClock = needs.FakeClock && o.Caps&nemesis.MovableClock != 0
		needs.Netns = needs.Netns && o.Caps&nemesis.ClientLinks != 0
		needs.Optional = false // the servers of equal needs are one cluster
		return needs, nil
	}
	for c, need := range asked {
		if need && o.Caps&c == 0 {
			why := o.Why[c]
			if why == "" {
				why = c.Takes()
			}
			return needs, configErrorf("backend %s: its servers cannot be started with %v: %s", b.Name, c, why)
		}
	}
	return needs, nil
}

// probe reads what one node holds of a case's keys through backend d's
// Probe, or is nil when d has none.
func probe(d backends.Descriptor, cfg backends.Config) func(context.Context, nemesis.Node, string) (nemesis.Stored, error) {
	if d.Probe == nil {
		return nil
	}
	return func(ctx context.Context, n nemesis.Node, substr string) (nemesis.Stored, error) {
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
		return profile{}, configErrorf("durability %q: want %s, %s or "+
			"%s", durability, results.DurabilityFast, results.DurabilityPeriodic, results.DurabilityDurable)
	}
	var needs nemesis.Needs
	if f.Scenario != nil {
		needs = f.Needs
	}
	return profile{durability: d, needs: needs}, nil
}

// Lost retires the servers backend b ran on: a fault left them lost (a
// consensus majority that lost its data), so the next case that needs
// them gets new ones.
func (c *Clusters) Lost(b Backend) {
	key := clusterKey{servers: b.Descriptor.Servers}
	if c.hosts != nil {
		key.backend = b.Name
	}
	c.mu.Lock()
	cl := c.set[key]
	c.mu.Unlock()
	if cl != nil {
		c.retire(cl.Processes)
	}
}

// Repair brings every node of t back: started, resumed, reachable, its
// clock back to real time. A nemesis heals what it broke; this is the
// safety net between cases. The nodes of a cluster that Lost retired stay
// down.
func (c *Clusters) Repair(ctx context.Context, t nemesis.Target) error {
	nodes, err := kinds.ComposeNodes(t.Nodes)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
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
	for _, n := range nodes {
		if !n.Running() && !c.retired[n] {
			down = append(down, n)
		}
	}
	c.mu.Unlock()
	if len(down) > 0 {
		// Together: members of a quorum come back only with one another.
		errs = append(errs, compose.StartAll(ctx, down...))
	}
	err = errors.Join(errs...)
	if err != nil {
		// Servers that could not be brought back (an ensemble that did
		// not elect again in time on a busy machine) are replaced before
		// the next case rather than handed to it broken.
		c.retire(nodes)
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
		if !slices.Contains(cl.Processes, nodes[0]) {
			continue
		}
		for _, n := range cl.Processes {
			c.retired[n] = true
		}
		_ = cl.stop()
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
