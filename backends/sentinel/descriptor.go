package sentinel

import (
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
)

func init() {
	backends.Register(backends.Descriptor{
		Name: "sentinel",
		Doc:  "the single-instance Redis lock on the master of a master–replica set that Redis Sentinel fails over",
		Open: Open,
		// A master and one replica, and the sentinels that watch them.
		Servers: backends.Servers{Kind: backends.Sentinel, Count: 2, MasterParam: "master"},
		Probe:   redis.Probe,
		Variants: []backends.Variant{
			// Its Redis nodes lose power, have their clocks moved and
			// their clients cut off as single Redis's node does (the
			// sentinels, on the clients' host, are cut off from a cut
			// master too, and may fail it over): the full suite measures
			// it; the default suite, at its time budget, leaves it there,
			// single Redis showing what a master alone does.
			{Suites: backends.AllSuites, Deferred: []string{"power-loss", "clock-jump", "clock-rate", "partition"}},
			// WAIT is there for the failover: what it buys.
			{Params: "wait=1", Suites: backends.DefaultSuite, Faults: []string{"failover"}},
		},
		Endpoints: backends.Endpoints{
			Flag:   "sentinel",
			Usage:  "the sentinels of the sentinel backend",
			Auth:   redis.Auth,
			Params: []backends.ParamFlag{{Flag: "sentinel-master", Param: "master", Usage: "the master name the sentinels monitor"}},
		},
	})
}
