// Package redlock is a Redlock distributed lock over N independent Redis
// masters, usable on its own as a library: it depends only on go-redis,
// the OpenTelemetry API and lockbench's small locker package.
//
//	clients := []*redis.Client{redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"}), ...}
//	rl, err := redlock.New(clients, redlock.WithFencing(true))
//	defer rl.Close() // releases what it still holds
//
//	// Once, where the nodes are created (or: lockbench redlock bootstrap --addrs ... --force).
//	err = rl.Bootstrap(ctx, redlock.Force())
//
//	lease, err := rl.Acquire(ctx, "invoice:42", locker.WithTTL(10*time.Second))
//	tok, _ := lease.Token() // pass it to the resource, which rejects older tokens
//	defer lease.Release(ctx)
//
// New takes one client per master: *redis.Client, or any
// redis.UniversalClient that is one master; a cluster client or a ring is
// refused (see New). Redlock dials connections of its own with each
// client's options (address, dialer, TLS, credentials, DB, client name,
// dial, read and write timeouts), so the clients' hooks, pools and retries
// do not apply to its commands. It does not close the clients.
//
// # First contact
//
// A node votes only once it has been admitted, and new nodes cannot be
// told from nodes that lost their data: a new cluster needs Bootstrap once
// (Bootstrap(ctx, Force()) on nodes that have just started), or the
// command `lockbench redlock bootstrap --addrs ...`. Left alone, nodes are
// admitted one max TTL after a client first finds them.
//
// # What it guarantees
//
// A lease is held by a majority (N/2+1) of the nodes, each of which set the
// key within the lease's validity: its TTL minus the time the round took
// minus TTL×drift+2ms. Every try asks every node (WithQuorumFirst asks a
// quorum first: faster, with less margin). Release deletes the key where
// it still holds the lease's random value, and says when fewer than a
// majority confirmed it (then retried in the background and by Close).
// An uncontended grant costs each node three plain commands (SET NX PX,
// HSETNX, HGET; with fencing, a small script that advances the key's
// counter too) rather than the acquire script.
// Errors say which node said what (locker.NodeError) and wrap a locker
// sentinel or ErrConfig, ErrInUse or ErrMaybeInUse.
//
// Beyond the published algorithm:
//
//   - Restart quarantine (on by default): a node that restarted, was
//     flushed, lost its admission marker or evicted keys is kept out of
//     the quorum for the largest max TTL its clients recorded (WithMaxTTL),
//     so it cannot grant a lock it forgot. Not covered: every node losing
//     its data before any client probed them, and a proxy that reconnects
//     a connection to a restarted server without closing it.
//   - Fencing tokens (WithFencing): strictly increasing from one grant of
//     a key to the next grant that began after it, as long as one node of
//     the overlap of their majorities kept its counter, or (the clock
//     floor, on by default with fencing) the clients' clocks disagree by
//     less than the time between the two grants.
//   - Hand-off: waiters of a key queue on a majority of the nodes, first
//     come first served across processes; a release hands the key to the
//     first waiter still trying and wakes it, without a new round; the
//     waiter sets it on the other nodes too before its Acquire returns,
//     so that a handed key lives on every node that answers, as a
//     granted one does.
//
// # The assumption fencing rests on
//
// Redlock is sound for efficiency, and tolerates the loss of a minority
// of nodes. For correctness it rests on timing: a holder that pauses past
// its validity keeps writing after someone else was granted the key, and
// a node whose clock jumps releases keys early. Fencing tokens let the
// protected resource reject the paused holder, but only if the resource
// checks them, and the tokens are only as durable as the nodes' counters
// (or the clients' clocks). If correctness matters and the resource
// cannot check a token, use a consensus-backed lock (etcd, ZooKeeper).
//
// # What the nodes need
//
// Redis 6.2 or later (tested with 7.0), maxmemory-policy noeviction (or no
// maxmemory). With ACLs, Redlock's user needs +evalsha +script|load
// +blpop +hget +set, +hsetnx and +info with the restart
// quarantine, +incr with fencing tokens without the clock floor, and
// inside its scripts
// +get +set +del +exists +pttl +pexpire +incr +time +hget +hset +hdel
// +hmget +hrandfield +zadd +zrange +zrem +zscore +rpush +ltrim
// (+client|setname with a ClientName, +select with a DB, +wait with
// WithWait); and the lock keys and those under its key prefix
// (DefaultKeyPrefix, or WithKeyPrefix), which lock names may not start
// with. A refusal names what is missing and wraps ErrConfig.
//
// # Observability and versions
//
// Spans, metrics and log records are described in telemetry.go
// (WithTracerProvider, WithMeterProvider, WithLogger); by default they go
// to the global OpenTelemetry providers, and nothing is logged. The
// package follows semantic versioning with the module; CHANGELOG.md lists
// every release, and its promise covers what Redlock keeps on the nodes
// (key layout, scripts), because clients that read the nodes differently
// do not exclude each other. Measurements against redsync are in the
// repository's docs/measurements.md ("Redlock library").
package redlock
