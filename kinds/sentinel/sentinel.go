// Package sentinel is the server kind of a Redis master with replicas,
// watched by redis-sentinel processes that promote a replica when the
// master fails: it registers what such a set offers the faults.
package sentinel

import (
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
)

func init() {
	kinds.Register(kinds.Kind{Name: backends.Sentinel, Offers: Offers})
}

// Offers is what a Sentinel set of n Redis nodes (a master and n-1
// replicas) offers the faults: a master to find, and a failover whose
// replication can be held back; its nodes can be paused, killed, cut off
// from their clients, powered off and have their clocks moved. Its
// clients reach no node through a proxy, and its nodes elect nothing.
func Offers(n int) kinds.Offer {
	o := kinds.Offer{
		Caps: nemesis.Servers | nemesis.Leadership | nemesis.Failover | nemesis.ClientLinks | nemesis.LosableData | nemesis.MovableClock,
		Why: map[nemesis.Capability]string{
			nemesis.Proxy: "needs servers the clients reach through proxies; Sentinel's clients follow the master the sentinels name, around any proxy",
			nemesis.Election: "a Sentinel set's Redis nodes elect nothing and only replicate from the master: the sentinels pick the master " +
				"(killing it is the failover fault's case, which cuts its replication too)",
			nemesis.Minority: "needs a cluster of at least 3 nodes: the Sentinel set has a master and one replica (losing the master is the failover fault's case)",
		},
	}
	if n >= 3 {
		o.Caps |= nemesis.Minority
	}
	return o
}
