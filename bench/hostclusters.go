package bench

import (
	"context"
	"errors"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/nemesis"
)

// OnHosts makes c start the servers of every backend that hs's inventory
// lists on their hosts; a backend it lists none for is refused (its
// servers would run here, where the client hosts may not reach them).
func (c *Clusters) OnHosts(hs *Hosts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hosts, c.placed = hs, map[string]*cluster{}
}

// onHosts returns backend b's servers placed on the hosts, started under
// profile prof: a set that ran under another one, or whose nodes
// restarted under a backend that admits its nodes, is stopped and wiped
// first (its dirs and ports are the inventory's, and there is one of
// each). Their data is never on a lazy filesystem (no power loss there).
func (c *Clusters) onHosts(ctx context.Context, b Backend, prof profile, ttl time.Duration) (nemesis.Target, error) {
	d := b.Descriptor
	s := d.Servers
	if !c.hosts.Serves(b.Name) {
		return nemesis.Target{}, configErrorf("backend %s: the inventory %s places no server for it", b.Name, c.hosts.inv.Path)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.placed[b.Name]
	if cl != nil && (cl.profile != prof || d.Admit != nil && restarted(cl.nodes, cl.admitted)) {
		for _, n := range cl.nodes {
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
		clock := prof.needs.FakeClock
		switch s.Kind {
		case backends.Redis:
			cl.nodes, err = c.env.Redis(ctx, s.Count, compose.RedisOptions{Durability: prof.durability, FakeClock: clock, On: pl})
		case backends.Postgres:
			var n *compose.Node
			if s.Count != 1 {
				return nemesis.Target{}, configErrorf("backend %s: %d PostgreSQL servers: lockbench starts one", d.Name, s.Count)
			}
			if n, err = c.env.Postgres(ctx, compose.PostgresOptions{Durability: prof.durability, FakeClock: clock, On: &pl[0]}); err == nil {
				cl.nodes = []*compose.Node{n}
			}
		default:
			return nemesis.Target{}, configErrorf("backend %s: lockbench places only Redis and PostgreSQL servers on hosts (not %s)", d.Name, s.Kind)
		}
		c.hosts.started(cl.nodes)
		if err != nil {
			return nemesis.Target{}, err
		}
		if err := cl.admit(s, cl.nodes, ttl); err != nil {
			return nemesis.Target{}, err
		}
		c.placed[b.Name] = cl
	}
	return nemesis.Target{Nodes: cl.nodes}, nil
}
