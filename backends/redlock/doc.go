// Package redlock is a Redlock distributed lock over N independent Redis
// masters, usable on its own as a library: it depends only on go-redis,
// the OpenTelemetry API and lockbench's small locker package, and
// registers nothing anywhere (backends/redlockbackend registers it
// with lockbench).
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
// # First contact
//
// A node votes only once it has been admitted, and new nodes cannot be
// told from nodes that lost their data. So a new cluster needs one
// explicit step, taken once by whoever creates the nodes: Bootstrap
// (Bootstrap(ctx, Force()) on nodes that have just started), or the
// command `lockbench redlock bootstrap --addrs ...`. Until then, and on
// nodes nobody bootstraps, a grant fails with an error that names that
// step; left alone, nodes are admitted one max TTL after a client first
// finds them. See Bootstrap for what it checks and refuses.
//
// # Versions and compatibility
//
// This package follows semantic versioning as the module
// github.com/lockbench/lockbench is tagged; CHANGELOG.md at the root of
// the repository lists every release. The promise covers its exported API
// (and the locker types it uses) and what it keeps on the nodes — the key
// layout, the scripts and the values they read — because clients of two
// versions that read the nodes differently do not exclude each other. A
// patch release changes neither. Below v1, a minor release may change
// them; it says so under "Breaking" in the CHANGELOG, with what to do
// (for a change on the nodes: stop every client of the old version, or
// let one max TTL pass, before starting the new one). From v1 on, such a
// change needs a new major version.
//
// # The algorithm
//
// An acquisition runs a Lua script on all nodes at once (SET key value NX
// PX ttl, and what follows), with a per-node timeout far below the TTL,
// and holds the key if a majority (N/2+1) granted it within its validity:
// TTL minus the time the round took minus TTL×drift+2ms. On failure it
// releases the key on every node it may have set it and tries again,
// bounded by the context. With WithQuorumFirst a try asks a quorum of the
// nodes first and the others only if one of those refuses or fails:
// faster (an uncontended Acquire and Release run 6 scripts instead of
// 10), at the price of the margin that a key set on every node has
// against a node that forgets it (see WithQuorumFirst). Extend re-arms the TTL on a majority; release
// deletes the key where it still holds our 128-bit random value. Per-node
// errors are joined (locker.NodeError), so an error says which node said
// what; every error wraps a locker sentinel (operations cut by Close:
// locker.ErrClosed) or one of this package's (ErrConfig, ErrInUse,
// ErrMaybeInUse).
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
// between the two grants. The floor is why tokens look like microsecond
// timestamps by default: every token is raised to at least the acquiring
// client's clock in µs, which keeps tokens increasing across nodes that
// lost their counters (a majority that restarts empty would otherwise
// count from 1 again) and lets a counter expire ten max TTLs (at least
// ten seconds) after its key's last grant instead of staying on every
// node for ever. Plain counters (WithClockFloor(false)) never expire, and
// only persistence (appendfsync always) keeps them increasing across
// restarts. Grants that overlap because mutual exclusion failed (a clock
// jump, a paused holder) are not ordered by anything.
//
// Restart quarantine (on by default; antirez's "delayed restart",
// enforced by the clients): a node votes only while its marker holds the
// run_id of the server process running now and that process has evicted
// no key since it was admitted. Every new connection checks that inside
// the server, after reading the memory policy (a node that may evict keys
// is not admitted); every grant checks the marker again, and records, on
// the node, the grant's expiry, so that a lock key found gone before it
// on a node that evicted keys takes that node out of the quorum before
// it grants the key to anyone else (eviction switched on at run time). A
// node found restarted (whatever data it reloaded), without its marker
// (restart without data, FLUSHALL, eviction) or evicting is kept out of
// the quorum for one quarantine from the moment a client first detects
// it, timed on the node's own clock; a client that had the node admitted
// also counts none of its votes for one quarantine from its own
// detection, whatever the marker says later. The quarantine lasts the
// largest max TTL recorded by the clients that took leases on the nodes
// (each grant records its client's; see WithMaxTTL), and a client admits
// a node that served it only after reading those records on every node,
// or on a quorum of admitted ones: two quorums share a node, so the max
// TTL of a lease that may be alive is among them. What it cannot cover: a
// loss of every node's data before any client probed them (no marker is
// left to tell them from new nodes: Bootstrap refuses nodes that
// restarted or were flushed within the max TTL, unless forced, but not
// nodes emptied otherwise); a client whose grants reached only nodes that
// all lost their data, while the others never saw it; and a proxy that
// reconnects a client's connection to a restarted server without closing
// it (identity is checked per connection).
//
// Hand-off: goroutines of one Redlock that want the same key queue for it
// in FIFO order, and only the first talks to the nodes. When the key is
// held, that goroutine queues on the nodes too — on the key's queue nodes:
// N/2+1 nodes in address order from one the key's hash picks, so that the
// queues of different keys spread over every node — ordered by when it
// began to try (its process's clock; for a goroutine that queued behind
// others of its process, when its turn came). A release hands the key to
// the first waiter there that is still trying (it renews its place with
// every attempt, at least every 500 ms): on those nodes — a majority, so
// newcomers are refused — its script sets the key to a value of that
// waiter's Acquire, with the TTL the waiter asked for, and wakes it (BLPOP
// on a list of its own). A waiter that hears this from all of the key's
// queue nodes holds the key from then on without asking the nodes again,
// valid until its last attempt's start plus its TTL (less the drift
// allowance): that attempt registered before the release ran, so the key
// lives at least that long on each of those nodes; one that hears it from
// fewer (a queue node is slow, hung, or does not vote) claims the key with
// a round of its own, as it does with fencing tokens or WithWait. So
// across processes the order is first come, first served, among waiters
// whose registrations reached the nodes; a key whose holder died expires
// and goes to whoever asks first; clocks that disagree by ε may reorder
// waiters that began within ε of each other; a waiter none of whose key's
// queue nodes answers paces its attempts by its retry strategy. The price
// of handing the key over without a round: a waiter that stops trying
// (its process paused or died) keeps its place for 2 s after its last
// attempt, and a key handed to it in that time stays taken for its TTL,
// as a holder's would — until it resumes, gives up (its Acquire hands the
// key on) or the key expires.
//
// Connections: each Redlock dials, with each client's options, one
// pipelined connection per node that carries every request of every
// goroutine (a round writes to every node before reading any reply, and
// concurrent callers share writes); one more per node for grants that
// WAIT (WithWait), which blocks its connection; and, once an Acquire has
// had to wait, one blocking connection to each node for hand-off
// notices. All are dialled once, in the background with the client's
// DialTimeout, and again only when they break. A round never dials and
// never waits for a node longer than the node timeout; it ends as soon as
// a majority granted (a refusal that queues waits for the other nodes
// that were answering, within the timeout), and a node that hangs
// (paused, blackholed) costs the other nodes' requests nothing, from the
// first Acquire on: the first rounds wait for the nodes' first dials for
// 100 ms at most once a quorum is connected.
//
// # The go-redis options it honours
//
// Redlock reads each client's options and dials its own connections
// with them: Addr and Network, the Dialer (which applies TLSConfig),
// Username, Password and the credentials providers, DB, ClientName (set
// on every connection), DialTimeout (for a dial and its handshake), and
// ReadTimeout and WriteTimeout when they are shorter than its own second
// (how long a connection may leave a request unanswered, or take to
// write, before it is given up and dialled again; a lock round's own
// timeout is the node timeout, far shorter). It ignores the pool options,
// MaxRetries, the hooks (see Observability), OnConnect and Protocol (it
// speaks RESP2). It does not close the clients.
//
// # Errors an operator must act on
//
// A node that refuses Redlock's configuration — credentials (WRONGPASS),
// an ACL (NOPERM, naming what the user lacks), a database, a TLS
// certificate it does not trust — or two addresses of one server (the
// same run_id) fail with errors wrapping ErrConfig; when too few nodes are
// left for a quorum, Acquire fails at once rather than retry until its
// context ends. A Release that fewer than a majority of the nodes
// confirmed (its context ended, the nodes were unreachable) returns an
// error saying so, the lease's Err says so too (it wraps
// locker.ErrReleased and the cause), and the release is retried at once
// in the background, and again by Close.
//
// # Close
//
// Close releases the keys of the leases still held and of the releases
// nobody confirmed (all at once, within a second), ends the leases, ends
// the operations in flight, and returns once every goroutine the library
// started has — within a bound even when the servers behind open
// connections are gone (about two seconds measured, a dial in progress
// included; a TLS dial, which go-redis does not let a context cut, may
// take up to the client's DialTimeout).
//
// # What the nodes need
//
// Redis 6.2 or later (tested with 7.0). maxmemory-policy noeviction (or
// no maxmemory): nodes that may evict keys are not admitted, and a node
// found evicting after its admission is taken out. With ACLs, Redlock's
// user needs +evalsha +script|load +blpop +hget, +info with the restart
// quarantine, and, inside its scripts, +get +set +del +exists +pttl
// +pexpire +incr +time +hget +hset +hdel +hmget +hrandfield +zadd +zrange
// +zrem +zscore +rpush +ltrim (+client|setname with a ClientName, +select
// with a DB, +wait with WithWait); and the lock keys and those starting
// with "\x00redlock:" (its own: counters, queues, the node's state; lock
// names may not start with that prefix). A refusal names what is missing.
// A Sentinel-managed master works through a failover client (one per
// Redlock; backends/sentinel is the lock on one such master).
//
// # Observability
//
// See telemetry.go's comment, summarised: spans redlock.Acquire,
// redlock.TryAcquire, redlock.Extend, redlock.Release, redlock.Bootstrap
// (WithTracerProvider); metrics redlock.acquire.duration,
// redlock.acquire.rounds, redlock.release.duration,
// redlock.extend.duration, redlock.node.errors, redlock.node.events and
// redlock.handoffs (WithMeterProvider); log records of nodes quarantined,
// admitted, evicting, misconfigured, lost and found, and of unconfirmed
// releases (WithLogger). Without options it reports to the global
// OpenTelemetry providers, which record nothing until the application
// installs an SDK, and logs nothing.
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
// nodes, in one process, on a 2-core machine that also runs the five
// servers, interleaved in turns of half a second, 10 s per contender and
// scenario (go test -run InterleavedComparison -v ./backends/redlock
// -args -compare=10s), an operation being Acquire + Release; on
// 2026-12-02, two runs on the quiet machine (load 2-5, the benchmark's
// own) and three with two busy loops added (load 4-5). Each cell is
// ops/s against redsync's in the same run, the p99 latency's ratio after
// it; one value per run:
//
//	scenario                 default                           WithQuorumFirst(true)
//	1 client, quiet          1.12x 1.09x                       1.53x 1.53x
//	  busy loops             1.26x 1.29x 1.28x                 1.56x 1.62x 1.52x
//	16 Redlocks, one key     1.23x 1.28x, p99 0.066x 0.069x    1.74x 1.62x, p99 0.036x 0.047x
//	  busy loops             1.45x 1.49x 1.56x,                1.94x 1.75x 1.99x,
//	                         p99 0.104x 0.087x 0.073x          p99 0.064x 0.084x 0.086x
//	16 goroutines, one key   1.59x 1.58x, busy 1.80x           2.20x 2.15x, busy 2.13x
//	16 goroutines, own keys  2.15x 2.18x, busy 2.24x           2.56x 2.68x, busy 2.50x
//
// In absolute terms (quiet, first run): 1 client 2,641 ops/s (p99 0.57
// ms), 3,620 with WithQuorumFirst, redsync 2,364 (0.69 ms); 16 Redlocks
// on one key 1,863 ops/s (p99 18 ms), 2,630 (10 ms), redsync 1,510 (273
// ms). Fencing tokens cost 2-4% uncontended, and a third on a hot key,
// where a waiter then claims the key with a round of its own.
//
// Uncontended, the machine's CPU is the bound: an Acquire + Release costs
// (TestCPUPerOperation, client + 5 servers, quiet) redsync 660-690 µs —
// its client 380-400, the servers 270-290 for 10 requests (5 SETs, 5
// small scripts) — ours 700-890 by default (client 220-300, servers
// 470-590 for 10 scripts), and 410-460 with WithQuorumFirst (client
// 150-180, servers 255-280 for 6 scripts). Asking every node, a Redlock
// sends as many requests as redsync, and wins only by a cheaper client
// and by waiting for the fastest three replies; each of our scripts
// (quarantine, grant record, queue) also costs a server about 17 µs more
// than one of redsync's requests. So 1.8x
// redsync uncontended is not reached here, even with WithQuorumFirst; on
// servers of their own, where a round trip and not the CPU is the bound,
// both make two rounds and the ratio tends to 1. Under a load average of
// 24-27 (other engineers' work) the default measured 1.55-2.11x on
// another day: the ratio moves with the load, hence both rows.
//
// "16 Redlocks" are separate instances, as 16 processes would have: every
// hand-off goes through the nodes, and after warm-up they open no
// connection at all. Their fair hand-off makes the p99 of N contenders
// about N-1 hand-offs: a release's script hands the key to the waiter
// that came first on the key's queue nodes and wakes it, and the waiter
// holds the key once all of them told it, without a round of its own.
// Each hand-off needs the releasing process, three Redis servers and the
// waiting process scheduled in turn: on a saturated machine the tail grows
// (at load 24-27: p99 0.15-0.29x redsync's; TestHandoffTail put every
// grant and release of such runs on one timeline and found no waiter that
// lost its place, only slow hand-offs), while redsync's p99 is its
// 50-250 ms retry sleep. redsync with a 1 ms retry delay on a hot key
// collapses instead (on an earlier run 480-560 ops/s, 111-121 of 4000
// operations failing with "lock already taken"). With WithQuorumFirst a
// newcomer's try, refused by the key's queue nodes, sets the key nowhere
// else, so it has nothing to release: that is its gain on a hot key.
package redlock
