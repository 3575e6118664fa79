// Package postgres is the server kind of one PostgreSQL server: it
// registers what the server offers the faults.
package postgres

import (
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
)

func init() {
	kinds.Register(kinds.Kind{Name: backends.Postgres, Offers: Offers})
}

// Offers is what one PostgreSQL server offers the faults: every fault of
// a single node; it has no replicas and no peers.
func Offers(int) kinds.Offer {
	return kinds.Offer{
		Caps: nemesis.Servers | nemesis.ClientLinks | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock,
		Why: map[nemesis.Capability]string{
			nemesis.Failover: "one PostgreSQL server without replicas has nothing to fail over",
			nemesis.Minority: "needs a cluster of at least 3 nodes: one PostgreSQL server has no minority to crash (its loss is what restart and server-pause do)",
			nemesis.Election: "one PostgreSQL server has no peers and elects no leader: there is no leader to kill or cut off from its followers, " +
				"and no members to split (its loss is what restart and server-pause do)",
		},
	}
}
