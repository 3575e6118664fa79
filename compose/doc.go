// Package compose runs real clusters on one machine for tests and
// benchmarks: redis-server, redis-sentinel, ZooKeeper and etcd members and
// PostgreSQL servers as child processes on 127.0.0.1, each with a free
// port, its own data dir and log under the run dir (a PostgreSQL server
// run as another user keeps its data dir outside it), and injects faults
// into them.
//
// Every node runs in its own process group with a parent-death signal, so
// nothing survives the run: Env.Close kills every group, and if the parent
// process itself dies (SIGKILL included) the kernel kills the children.
// (A PostgreSQL server's children leave its group; they follow their
// postmaster when it dies, and compose finds them by their working dir.)
//
// Topologies: Env.Redis (independent masters, for Redlock), Env.Sentinel
// (a master, replicas and sentinels, optionally with proxied replication
// links for lost-write failovers), Env.ZooKeeper and Env.Etcd (quorum
// ensembles whose members start together) and Env.Postgres (one server,
// durable or fast). Each waits until its servers
// serve, and offers what faults need: the current master or leader, and
// waits for a new one.
//
// Node controls are the fault catalogue's primitives: Kill, Stop, Start,
// Restart (with or without its data), Wipe, Pause and Resume
// (SIGSTOP/SIGCONT), and, for a node started behind a proxy, Partition,
// Heal and Delay through an in-process Toxiproxy (latency; a proxy keeps
// every TCP connection open). KillAll, PowerLossAll and StartAll act on
// several nodes at once (a majority of a quorum, which cannot come back
// one member at a time).
//
// Three facilities make the faults real, each only for the servers that
// ask for it in their options:
//
//   - LazyFS puts a node's dir on a lazy FUSE filesystem (Jepsen's LazyFS
//     idea) that keeps every write in memory until the file is fsynced;
//     Node.PowerLoss kills the server and drops what it had not synced.
//     Every server kind takes a Durability (fast, periodic, durable) that
//     says when it fsyncs.
//   - FakeClock runs a server under a preload (built from preload/clock.c
//     with the C compiler) that moves its wall clock: Node.JumpClock and
//     Node.SetClockRate. Go servers (etcd members) cannot be reached by a
//     preload.
//   - Netns (and PeerNetwork) run servers in network namespaces of their
//     own, reachable from this host by routes, so that Node.CutClients
//     cuts their clients off silently, as a partition does.
//
// Partitions between the members of a quorum (etcd, ZooKeeper) need more
// than a proxy, since members dial each other both ways: a cluster started
// with PeerNetwork runs each member in a network namespace of its own,
// behind a router namespace, and its Partition drops the packets between
// chosen groups of members silently, in both directions, while clients on
// this host still reach every member (EtcdCluster.Partition,
// Ensemble.Partition). It needs root and the ip command
// (PeerNetworkAvailable says why not); the namespaces die with the process.
package compose
