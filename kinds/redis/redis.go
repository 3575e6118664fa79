// Package redis is the server kind of standalone Redis masters,
// independent of each other (one for the redis backend, five for
// Redlock's): it starts them on compose's toolkit (StartServers) and
// registers what a set of them offers the faults.
package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
)

func init() {
	kinds.Register(kinds.Kind{Name: backends.Redis, Offers: Offers, Start: Start,
		StartCost: kinds.Every(300 * time.Millisecond), Versions: Versions,
		OnHost: func() inventory.Needs { return inventory.Needs{Binary: DefaultPrograms().Server} }})
}

// Versions reports the version of this machine's redis-server (what
// --version prints).
func Versions(ctx context.Context) map[string]string {
	if v, ok := kinds.Probe(ctx, `v=(\S+)`, DefaultPrograms().Server, "--version"); ok {
		return map[string]string{"redis-server": v}
	}
	return nil
}

// Offers is what n independent Redis masters offer the faults: each can be
// paused, killed, restarted, cut off, delayed, powered off and have its
// clock moved; they elect nothing and have no replicas.
func Offers(n int) kinds.Offer {
	o := kinds.Offer{
		Caps: nemesis.Servers | nemesis.ClientLinks | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock,
		Why:  map[nemesis.Capability]string{},
	}
	if n >= 3 {
		// Independent masters: a lock on them asks a quorum of them from
		// its client, and each client can sit in a namespace of its own.
		o.Caps |= nemesis.Minority | nemesis.ClientNets | nemesis.ClientQuorum
	}
	if n == 1 {
		o.Why[nemesis.Failover] = "one standalone Redis server has no replica to fail over to (the sentinel kind measures a failover)"
		o.Why[nemesis.Minority] = "needs a cluster of at least 3 nodes: one Redis server has no minority to crash " +
			"(its loss is what restart and server-pause do)"
		o.Why[nemesis.ClientNets] = "one Redis server: there is no set of nodes to split its clients' views of"
		o.Why[nemesis.ClientQuorum] = "a client of one Redis server asks that server, not a quorum"
		o.Why[nemesis.Leadership] = "one Redis server is the only node: there is no leader among nodes to cut a client from"
		o.Why[nemesis.Election] = "one Redis server has no peers and elects no leader: " +
			"there is no leader to kill or cut off from its followers, " +
			"and no members to split (its loss is what restart and server-pause do)"
		return o
	}
	o.Why[nemesis.Failover] = fmt.Sprintf("the %d independent Redis masters have no replicas: "+
		"there is nothing to fail over (the sentinel kind measures a failover)", n)
	o.Why[nemesis.Minority] = fmt.Sprintf("needs a cluster of at least 3 nodes: %d Redis masters have no minority to crash", n)
	o.Why[nemesis.Leadership] = fmt.Sprintf("the %d independent Redis masters are peers: none leads (split-view cuts a client "+
		"from some of them)", n)
	o.Why[nemesis.Election] = fmt.Sprintf("the %d independent Redis masters elect no leader and never talk to one another: "+
		"there is no leader to kill (crash-minority kills any of them) and no traffic between them to cut", n)
	return o
}

// Start starts spec.Count Redis masters: here each behind its proxy (and
// in a network namespace of its own when spec needs one), or on the
// hosts spec.On names.
func Start(ctx context.Context, env *compose.Env, spec kinds.Spec) (*kinds.Cluster, error) {
	nodes, err := StartServers(ctx, env, spec.Compose(), Options{})
	if err != nil {
		return nil, err
	}
	return kinds.Nodes(nodes), nil
}
