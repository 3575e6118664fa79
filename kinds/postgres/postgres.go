// Package postgres is the server kind of one PostgreSQL server: it
// starts the server on compose's toolkit (StartServer, URL) and registers
// what the server offers the faults.
package postgres

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
	// The inventory names its postgres; it runs as PostgreSQL's own
	// account, which refuses root.
	kinds.Register(kinds.Kind{Name: backends.Postgres, Offers: Offers, Start: Start,
		StartCost: kinds.Once(3 * time.Second), Versions: Versions,
		OnHost: func() inventory.Needs { return inventory.Needs{Account: DefaultPrograms().User} }})
}

// Versions reports the version of Debian's postgresql package, which the
// server runs.
func Versions(ctx context.Context) map[string]string {
	if v, ok := kinds.Probe(ctx, `^(\S+)$`, "dpkg-query", "-W", "-f=${Version}", "postgresql"); ok {
		return map[string]string{"postgres": v}
	}
	return nil
}

// Offers is what one PostgreSQL server offers the faults: every fault of
// a single node; it has no replicas and no peers.
func Offers(int) kinds.Offer {
	return kinds.Offer{
		Caps: nemesis.Servers | nemesis.ClientLinks | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock,
		Why: map[nemesis.Capability]string{
			nemesis.Failover: "one PostgreSQL server without replicas has nothing to fail over",
			nemesis.Minority: "needs a cluster of at least 3 nodes: one PostgreSQL server has no minority to crash " +
				"(its loss is what restart and server-pause do)",
			nemesis.Leadership: "one PostgreSQL server is the only node: there is no leader among nodes to cut a client from",
			nemesis.Election: "one PostgreSQL server has no peers and elects no leader: there is no leader to kill or cut off from its followers, " +
				"and no members to split (its loss is what restart and server-pause do)",
		},
	}
}

// Start starts the one PostgreSQL server spec asks for: here behind its
// proxy (and in a network namespace of its own when spec needs one), or
// on the host spec.On names.
func Start(ctx context.Context, env *compose.Env, spec kinds.Spec) (*kinds.Cluster, error) {
	if spec.Count != 1 {
		return nil, fmt.Errorf("postgres: %d PostgreSQL servers: lockbench starts one", spec.Count)
	}
	n, err := StartServer(ctx, env, spec.Compose(), Options{})
	if err != nil {
		return nil, err
	}
	return kinds.Nodes([]*compose.Node{n}), nil
}
