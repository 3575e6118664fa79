package suites

import (
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/postgres"
	"github.com/lockbench/lockbench/results"
)

// every is what a rule's Every stands for in the predefined suites: each
// registered backend by its plain name, but for those the table runs as
// several locks, listed here by the specs it runs instead (PostgreSQL's
// session advisory locks and its lease table are two locks).
var every = map[string][]string{
	"postgres": {"postgres?mode=advisory", "postgres?mode=lease"},
}

// profiles.
const (
	fast     = results.DurabilityFast
	periodic = results.DurabilityPeriodic
	durable  = results.DurabilityDurable
)

// Table is the case table of the predefined suites: every rule, with the
// suites that hold it. The order of a suite's faults is the order its
// rules first name them (the faults whose servers need something of their
// own, network namespaces, the clock preload, a lazy filesystem, come
// last, grouped, so that the servers are restarted for them once); each
// fault's backends come in the registry's order.
var Table = []Rule{
	// The fault-free sweep, clients as goroutines, on every backend.
	{In: InAll, Backends: Every, Faults: []string{Sweep}},

	// make bench: every backend under the fault catalogue, within about 15
	// minutes on 2 cores. A pause of 1.5 leases after the read, which no
	// lock without fencing should survive.
	{In: InDefault, Backends: Every, Faults: []string{"none", "client-pause", "server-pause", "failover"}},
	// A majority's restart where it can cost a lock its keys (Redis
	// without persistence, the PostgreSQL server's advisory locks, a
	// Sentinel set); ZooKeeper and etcd face it in the full suite (their
	// minority's crash and leader's loss are here).
	{In: InDefault, Backends: Kinds(backends.Redis, backends.Sentinel, backends.Postgres), Faults: []string{"restart"}},
	{In: InDefault, Backends: Every, Faults: []string{"crash-minority", "partition-leader", "partition-halves",
		"leader-kill", "partition", "clock-jump"}},
	// Slow links, the class both intents' budgets keep last, are what
	// make bench's 15 minutes leave to the full suite.
	{In: InDefault, Backends: Every, Faults: []string{"latency"},
		Leave: "to the full suite, for make bench's 15 minutes (the class applies: make bench-full runs it)"},
	// A power loss of a majority on the locks where the Redlock spec's
	// claims about fsync and its delayed restart live (single Redis and
	// Redlock; the full suite runs it on every backend, and under durable
	// too), under periodic, Redis's everysec fsync, the profile whose
	// promise it tests (fast keeps nothing, by design).
	{In: InDefault, Backends: Specs("redis", "redlock"), Faults: []string{"power-loss"}},
	{In: InDefault, Faults: []string{"power-loss"}, Profiles: []string{periodic}},
	// A Sentinel set's Redis nodes lose power, have their clocks moved and
	// their clients cut off as single Redis's node does (the sentinels, on
	// the clients' host, are cut off from a cut master too, and may fail it
	// over): single Redis shows what a master alone does in make bench.
	{In: InDefault, Backends: Specs("sentinel"), Faults: []string{"power-loss", "clock-jump", "clock-rate", "partition"},
		Leave: "to the full suite, for its time budget (the class applies: make bench-full runs it)"},

	// make bench-quick: a smoke run; a majority's restart on the
	// Redis-based locks only.
	{In: InQuick, Backends: Every, Faults: []string{"client-pause"}},
	{In: InQuick, Backends: Kinds(backends.Redis), Faults: []string{"restart"}},
	{In: InQuick, Backends: Every, Faults: []string{"crash-minority"}},

	// make bench-full: a client pause at every point of the client's
	// cycle and of half a lease, a minority's crash and a whole crash,
	// both sizes of clock jump and a clock that runs fast, everywhere they
	// apply, and every durability profile under every fault that may cost
	// servers their data.
	{In: InFull, Backends: Every, Faults: []string{"none", "client-pause", "client-pause?x=0.5", "client-pause?at=before-read",
		"client-pause?at=after-write", "client-pause?at=acquire", "client-pause?at=granted", "client-clock", "server-pause",
		"failover", "restart",
		"crash", "crash-minority",
		"latency", "partition-leader", "partition-halves", "leader-kill", "partition", "clock-jump?by=0.5&nodes=minority",
		"clock-jump", "clock-rate", "power-loss"}},
	// Split views: clients in namespaces of their own, cut from
	// different minorities (Redlock's, redsync's overlapping majorities;
	// ZooKeeper's and etcd's members) or one from the leader alone.
	{In: InFull, Backends: Every, Faults: []string{"split-view", "client-leader"}},
	{In: InFull, Faults: []string{"restart", "crash", "power-loss", "crash-minority"}, Profiles: []string{fast, periodic, durable}},
	// Jepsen's schedule on the locks the answer recommends for
	// correctness: two minutes of an injection every few seconds, drawn
	// from every class that applies, composed pairs included.
	{In: InFull, Backends: Kinds(backends.ZooKeeper, backends.Etcd), Faults: []string{"mixed?seconds=120"}},

	// Variants that exist for one argument. Without its quarantine, a
	// Redlock majority restarted empty grants held keys again; with plain
	// counters for tokens, nodes restarted empty forget them.
	// They are not candidates for a service, so make bench leaves them to
	// the full suite (make bench-quick keeps the quarantine's restart).
	{In: InFull, Backends: Specs("redlock?quarantine=false"), Faults: []string{"restart", "power-loss"}},
	{In: InQuick, Backends: Specs("redlock?quarantine=false"), Faults: []string{"restart"}},
	{In: InFull, Backends: Specs("redlock?clockfloor=false"), Faults: []string{"restart"}},
	// WAIT is there for the failover: what it buys.
	{In: InFull, Backends: Specs("sentinel?wait=1"), Faults: []string{"failover"}},
	// Advisory locks with a keepalive bound: the server frees a cut-off
	// holder's lock within it rather than hours later, which only a
	// partition tells.
	{In: InFull, Backends: Specs("postgres?mode=advisory&keepalive=" + postgres.CaseKeepalive.String()), Faults: []string{"partition"}},
}
