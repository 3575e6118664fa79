// Package redlock is a Redlock distributed lock over N independent Redis
// masters, usable on its own as a library: it depends only on go-redis and
// lockbench's small locker package.
//
//	clients := []redis.UniversalClient{redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"}), ...}
//	rl, err := redlock.New(clients, redlock.WithFencing(true))
//	lease, err := rl.Acquire(ctx, "invoice:42", locker.WithTTL(10*time.Second))
//	tok, _ := lease.Token() // pass it to the resource, which rejects older tokens
//	defer lease.Release(ctx)
//
// # The algorithm
//
// An acquisition sends SET key value NX PX ttl (inside a Lua script) to all
// nodes at once, with a per-node timeout far below the TTL, and holds the
// key if a majority (N/2+1) granted it within its validity: TTL minus the
// time the round took minus TTL×drift+2ms. On failure it releases the key
// on every node it asked and retries after a jittered backoff, bounded by
// the context. Extend re-arms the TTL on a majority; release deletes the
// key where it still holds our 128-bit random value. Per-node errors are
// joined (locker.NodeError), so an error says which node said what.
//
// Beyond the algorithm as published, and beyond the other Go Redlocks:
//
//   - Fencing tokens (WithFencing): a per-key counter on each node, advanced
//     in the acquire script; the lease's token is the maximum over the
//     granting majority, written back to a majority when they disagree, so
//     every later grant returns a larger one while nodes keep their data.
//     A node restarted empty loses its counters, and a majority of such
//     nodes would hand out small tokens again: by default tokens are also
//     raised to the acquiring client's clock in µs (WithClockFloor), which
//     keeps them increasing across such restarts; with plain counters
//     only persistence (appendfsync always) does.
//   - Restart quarantine (on by default): a node whose Redis process
//     changed (run_id) or lost its data does not vote until it has been up
//     for one max TTL — antirez's "delayed restart", enforced by the client.
//     New nodes are admitted with Bootstrap.
//   - Fast hand-off: goroutines of one Redlock wanting one key queue in
//     FIFO order; the head waits for a release notification instead of
//     sleeping 50–250 ms: the release script pushes a token on the key's
//     hand-off list, on which waiters of every process block (BLPOP), so a
//     release wakes exactly the longest waiter, where pub/sub would wake
//     them all into a split vote. Under contention a client asks the
//     priority node (the first in address order) before the others, and
//     the winner of a split vote completes it instead of all sides backing
//     off, so short retries do not livelock.
//   - Speed: each node has one pipelined connection of Redlock's own;
//     a round writes to every node before reading any reply, from the
//     caller's goroutine, and concurrent callers share writes.
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
// only as durable as the nodes' data. If the protected resource can check
// a token, use fencing; if correctness matters and it cannot, use a
// consensus-backed lock (ZooKeeper, etcd) and still expect paused holders.
// lockbench's measurements of all of this are in the repository's README.
//
// # Performance
//
// Against redsync (the reference Go Redlock) on the same 5 local Redis
// nodes in one process, on 2 cores, medians of 3 runs of 4000 operations
// (go test -run '^$' -bench . ./backends/redlock; read them as ratios):
//
//	scenario                          redlock                   redsync                    ratio
//	1 client, Acquire+Release         2886 ops/s, p99 0.75 ms   1708 ops/s, p99 0.99 ms    1.69x ops/s
//	16 goroutines, one key            2848 ops/s, p99 9.3 ms    1322 ops/s, p99 338 ms     2.2x ops/s, 0.027x p99
//	  redsync with a 1 ms retry delay                           546 ops/s, ~120 failures
//	16 Redlocks (processes), one key  2424 ops/s, p99 87 ms     1630 ops/s, p99 292 ms     1.5x ops/s, 0.30x p99
//	16 goroutines, own keys           10170 ops/s, p99 4.3 ms   3138 ops/s, p99 9.4 ms     3.2x ops/s
//	  with fencing tokens             8879 ops/s, p99 4.3 ms                               2.8x
package redlock
