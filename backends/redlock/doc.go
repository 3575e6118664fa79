// Package redlock is a Redlock distributed lock over N independent Redis
// masters, usable on its own as a library: it depends only on go-redis and
// lockbench's small locker package, and registers nothing anywhere
// (backends/redlock/redlockbackend registers it with lockbench).
//
//	clients := []*redis.Client{redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"}), ...}
//	rl, err := redlock.New(clients, redlock.WithFencing(true))
//	defer rl.Close() // releases what it still holds
//	lease, err := rl.Acquire(ctx, "invoice:42", locker.WithTTL(10*time.Second))
//	tok, _ := lease.Token() // pass it to the resource, which rejects older tokens
//	defer lease.Release(ctx)
//
// # The algorithm
//
// An acquisition sends SET key value NX PX ttl (inside a Lua script, or
// as a plain command when uncontended and without fencing) to all nodes at
// once, with a per-node timeout far below the TTL, and holds the key if a
// majority (N/2+1) granted it within its validity: TTL minus the time the
// round took minus TTL×drift+2ms. On failure it releases the key on every
// node it may have set it and tries again, bounded by the context. Extend
// re-arms the TTL on a majority; release deletes the key where it still
// holds our 128-bit random value. Per-node errors are joined
// (locker.NodeError), so an error says which node said what; every error
// wraps a locker sentinel (operations cut by Close: locker.ErrClosed).
//
// # Beyond the published algorithm
//
// Fencing tokens (WithFencing): a per-key counter on each node, advanced
// by the acquire script; a lease's token is the largest its granting
// majority returned, written back to a majority before Acquire returns.
// Tokens of a key strictly increase from one grant to the next grant that
// began after it, as long as one node of the overlap of their majorities
// kept its counter — or, with the clock floor (on by default with
// fencing), as long as the clients' clocks disagree by less than the time
// between the two grants: every token is also raised to the acquiring
// client's clock in µs, which keeps tokens increasing across nodes that
// lost their counters, and lets a counter expire ten max TTLs (at least
// ten seconds) after its key's last grant instead of staying on every
// node for ever. Plain counters (WithClockFloor(false)) never expire, and
// only persistence (appendfsync always) keeps them increasing across
// restarts. Grants that overlap because mutual exclusion failed (a clock
// jump, a paused holder) are not ordered by anything.
//
// Restart quarantine (on by default; antirez's "delayed restart", enforced
// by the clients): a node votes only while its marker key holds the
// run_id of the server process running now. Every new connection checks
// that inside the server; a node found restarted (whatever data it
// reloaded) or without its marker (restart without data, FLUSHALL,
// eviction) is kept out of the quorum for one quarantine from the moment
// a client first detects it, timed on the node's own clock; a client that
// had the node admitted also counts none of its votes for one quarantine
// from its own detection, whatever the marker says later. The quarantine
// lasts the largest max TTL recorded on the nodes' markers by the clients
// that took leases there (each records its own; see WithMaxTTL), so every
// lock the node may have forgotten has expired by then. What it cannot
// cover: a loss of every node's data at once (no marker is left to record
// the max TTLs, nor to tell the nodes from new ones: that is a restart of
// the whole lock, to do with the clients stopped or after one max TTL);
// and a proxy that reconnects a client's connection to a restarted server
// without closing it (identity is checked per connection).
//
// New nodes are admitted by Bootstrap, once, by whoever creates them;
// Bootstrap admits nothing on nodes that were already in use (ErrInUse),
// so it cannot readmit a node that lost its data, but it is not a
// start-up routine for clients either. Nodes left alone are admitted one
// max TTL after a client first finds them.
//
// Hand-off: goroutines of one Redlock that want the same key queue for it
// in FIFO order, and only the first talks to the nodes. When the key is
// held, that goroutine queues on the nodes too (the first N/2+1 in address
// order), ordered by when it began to try (its process's clock; for a
// goroutine that queued behind others of its process, when its turn came);
// a release hands the key to the first waiter there that is still trying
// (it renews its place with every attempt, at least every 500 ms) by
// reserving the key for it on those nodes — a majority, so newcomers are
// refused — and wakes it at once (BLPOP on a list of its own). So across
// processes the order is first come, first served, among waiters whose
// registrations reached the nodes;
// a waiter that stops trying (a paused process) delays the next one by
// one reservation (4 node timeouts, at least 100 ms); a key whose holder
// died expires and goes to whoever asks first; clocks that disagree by ε
// may reorder waiters that began within ε of each other.
//
// Connections: each Redlock dials, with each client's options, one
// pipelined connection per node that carries every request of every
// goroutine (a round writes to every node before reading any reply, and
// concurrent callers share writes); one more per node for grants that WAIT
// (WithWait), which blocks its connection; and, once an Acquire has had to
// wait, one blocking connection to each of the first two nodes for
// hand-off notices. All are dialled once, in the background with the
// client's DialTimeout, and again only when they break. A round never
// dials and never waits for a node longer than the node timeout; it ends
// as soon as a majority granted (a refusal that queues waits for every
// node, within the timeout), and a node that hangs (paused, blackholed)
// costs the other nodes' requests nothing: writes to it leave the
// callers' goroutines and use the connection's own deadline, never a
// caller's.
//
// # What the nodes need
//
// Redis 6.2 or later (tested with 7.0). maxmemory-policy noeviction (or
// no maxmemory): under any other policy a node may evict lock keys while
// it keeps its marker, so nodes that may evict are never admitted. With
// ACLs, Redlock's user needs EVALSHA, SCRIPT LOAD, BLPOP, INFO (with the
// restart quarantine, from inside the scripts), and the lock keys and
// those starting with "\x00redlock:" (its own: counters, queues, the
// marker; lock names may not start with that prefix); a refusal names
// them. A Sentinel-managed master works through a failover client (one per
// Redlock; backends/sentinel is the lock on one such master).
//
// # When to use it, and when not
//
// Redlock is sound for efficiency — avoiding duplicate work, where an
// occasional double grant costs little — and tolerates the loss of a
// minority of nodes. For correctness it rests on timing: a holder that
// pauses (GC, swap, a slow network) past its validity keeps writing after
// someone else was granted the key, and a node whose clock jumps releases
// keys early. Kleppmann's remedy is a fencing token checked by the
// resource; with WithFencing this Redlock provides one, but the tokens are
// only as durable as the nodes' data (or the clients' clocks). If the
// protected resource can check a token, use fencing; if correctness
// matters and it cannot, use a consensus-backed lock (ZooKeeper, etcd) and
// still expect paused holders. lockbench's measurements of all of this
// are in the repository's README.
//
// # Performance
//
// Against redsync (the reference Go Redlock) on the same 5 local Redis
// nodes, in one process, on a 2-core machine shared with other engineers'
// builds (load average 1.3 to 14 during the runs): interleaved in turns of
// half a second, 15 s per contender and scenario (go test -run
// InterleavedComparison -v ./backends/redlock -args -compare=15s), an
// operation being Acquire + Release; medians of 3 runs, the range in
// brackets. Read them as ratios.
//
//	scenario                     redlock                     redsync                     ratio
//	1 client                     3686 ops/s, p99 0.74 ms     2304 ops/s, p99 1.15 ms     1.60x ops/s [1.60-1.68]
//	  with fencing tokens        3190 ops/s                                              1.38x [1.34-1.47]
//	16 goroutines, one key       3352 ops/s, p99 12.0 ms     1393 ops/s, p99 301 ms      2.41x [2.17-2.41], p99 0.040x [0.032-0.041]
//	16 Redlocks, one key         1831 ops/s, p99 17.4 ms     1488 ops/s, p99 287 ms      1.21x [1.10-1.23], p99 0.061x [0.061-0.093]
//	16 goroutines, own keys      14122 ops/s, p99 4.8 ms     3354 ops/s, p99 19.7 ms     4.48x [3.76-4.57]
//
// "16 Redlocks" are separate instances, as 16 processes would have: every
// hand-off goes through the nodes, and after warm-up they open no
// connection at all (BenchmarkHotKeyProcesses reports 0 per 1000
// operations), where the hand-off used to dial one per contended Acquire.
// That scenario is the one that depends on the machine: its fair hand-off
// (every release wakes the next waiter, who claims the key with a round
// of its own; the releaser, if it wants the key again, queues with a
// round of its own) costs 1.35-1.5x the CPU per operation of redsync,
// whose holder simply takes the key again while the others sleep 50-250 ms
// (hence its p99). Measured by TestCPUPerOperation (client + 5 servers,
// µs per operation): 860-1020 against 640-680 with 16 Redlocks, 420-520
// against 600-645 uncontended. So while the CPUs have room Redlock is the
// faster (1.10-1.23x interleaved), and on a saturated machine it can fall
// below redsync: run one after the other under load average 5-6, the
// benchmarks gave 0.78-1.27x, p99 still 0.05-0.08x. redsync with a 1 ms
// retry delay on a hot key collapses instead (480-560 ops/s, 111-121 of
// 4000 operations failing with "lock already taken").
package redlock
