package bench

import (
	"context"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/kinds"
)

// OnHosts makes c start the servers of every backend that hs's inventory
// lists on their hosts, by the path that starts them here (Clusters.Setup:
// the kind's Start, given the inventory's placements); a backend it lists
// none for is refused (its servers would run here, where the client hosts
// may not reach them). Their data sits on a lazy filesystem when a case
// needs one (a power loss), served on each host by the lockbench binary,
// uploaded there for it.
func (c *Clusters) OnHosts(hs *Hosts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hosts = hs
}

// provideFor uploads to the hosts of placements pl what servers of kind k
// need there that the inventory does not name: the kind's program
// (etcd-member), and the lockbench binary when their data sits on a lazy
// filesystem (lazy), which it serves.
func (hs *Hosts) provideFor(ctx context.Context, k kinds.Kind, pl []compose.Placement, lazy bool) error {
	if lazy {
		if err := hs.provideLockbench(ctx, pl); err != nil {
			return err
		}
	}
	if k.Program == nil || k.OnHost == nil || k.OnHost().Uploaded == "" {
		return nil
	}
	return hs.provide(ctx, pl, k.OnHost().Uploaded, k.Program, func(p *compose.Placement) *string { return &p.Binary })
}

// ServerNeeds is what a server of backend name needs on its host when a
// run over an inventory starts it there, for lockbench hosts check, as its
// kind says (kinds.Kind.OnHost): the program it runs when the inventory
// names none (redis-server, java), the one the run uploads instead
// (etcd-member), the files it reads (ZooKeeper's jars), the account it
// runs as (PostgreSQL's).
func ServerNeeds(name string) inventory.Needs {
	d, ok := backends.Lookup(name)
	if !ok {
		return inventory.Needs{}
	}
	k, err := kinds.Lookup(d.Servers.Kind)
	if err != nil || k.OnHost == nil {
		return inventory.Needs{}
	}
	return k.OnHost()
}
