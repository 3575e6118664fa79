// Package compose runs real servers for tests and benchmarks, whatever
// they run, and injects faults into them: each a child process on
// 127.0.0.1 with a free port, its own data dir and log under the run dir
// (a server run as another user may keep its data dir outside it), or a
// process on a host of the caller's choosing. It knows no server kind:
// each kind's package (kinds/redis, kinds/sentinel, kinds/zookeeper,
// kinds/etcd, kinds/postgres) starts its servers on the toolkit below.
//
// Every control of a node goes through its host's remote.Remote: on this
// machine remote.Local (in the node's network namespace, if it has one),
// on a host of the caller's choosing (Placement) an SSH connection. A
// server is started detached, in a session of its own, with a pidfile,
// and is only ever found by that pidfile; its signals, pauses and kills
// reach its process tree (its group and every descendant, wherever it
// moved: a PostgreSQL server's children lead sessions of their own). So
// one piece of code injects a fault here and on another host. On this
// machine nothing survives the run: Env.Close kills every server, and if
// the parent process itself dies (SIGKILL included) the kernel kills its
// children (a parent-death signal), and PostgreSQL's follow their
// postmaster. On another host, a server whose control node vanished runs
// on until the next run's start finds it by its pidfile and kills it.
//
// The toolkit a kind builds on: a Spec, what every kind shares (how many
// nodes, their durability, the mechanisms below, where they run), checked
// by Spec.Resolve against the kind's Rules; a Layout of its nodes' addresses
// and ports (Env.LayOut here, LayOutOn on hosts); a NodeSpec per node (its
// program, arguments, configuration written by Prepare, readiness probe,
// clock reader), placed by Layout.Place and started by Env.StartNode or,
// for the members of a quorum that start together, Env.StartNodes; Peers,
// which partition a quorum's members; and the waits a cluster's controls
// use (Poll, LeaderOf, AwaitLeader). Env.Cleanup registers what Close
// lifts, such as a HostLink's cut.
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
// ask for it in their Spec:
//
//   - LazyFS puts a node's dir on a lazy FUSE filesystem (Jepsen's LazyFS
//     idea) that keeps every write in memory until the file is fsynced;
//     Node.PowerLoss kills the server and drops what it had not synced.
//     Every server kind takes a Durability (fast, periodic, durable) that
//     says when it fsyncs.
//   - FakeClock runs a server under a preload (built from preload/clock.c
//     with the C compiler, on the server's host) that moves its wall
//     clock, read from a page file that Node.JumpClock and
//     Node.SetClockRate rewrite through the host's Remote. Go servers
//     (etcd members) cannot be reached by a preload.
//   - Netns runs servers in network namespaces of their own, reachable
//     from this host by routes, so that Node.CutClients
//     cuts their clients off silently, as a partition does. A server
//     placed on a host is cut off from its client hosts by blackhole rules
//     aimed at its port on both sides (remote.CutPaths).
//
// Every kind's servers can be placed on other hosts (Spec.On): `lockbench
// run --inventory` starts them there. The members of a quorum placed each
// on a host of its own are partitioned by
// blackhole rules on their hosts aimed at each other's peer ports
// (Placement.PeerPorts), the rules that cut a placed node's clients off.
//
// Partitions between the members of a quorum (etcd, ZooKeeper) need more
// than a proxy, since members dial each other both ways: a cluster started
// with Netns runs each member in a network namespace of its own,
// behind a router namespace, and its Partition drops the packets between
// chosen groups of members silently, in both directions, while clients on
// this host still reach every member (Peers.Partition). It needs root and the ip command
// (PeerNetworkAvailable says why not); the namespaces die with the process.
package compose
