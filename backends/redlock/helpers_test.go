//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"flag"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
)

// fresh starts n new Redis masters for one test, admits them to the
// quorum once (they are new) and returns them with their addresses (the
// proxies' when o.Proxied).
func fresh(t *testing.T, n int, o redisOptions) ([]*server, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := forTest(t).Redis(ctx, n, o)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i, nd := range nodes {
		addrs[i] = nd.Addr()
	}
	if err := bootstrap(ctx, addrs); err != nil {
		t.Fatal(err)
	}
	return nodes, addrs
}

// quorumFirst runs the tests' Redlocks WithQuorumFirst(true) (unless a
// test sets it itself): the whole suite, in that mode,
//
//	go test ./backends/redlock -args -quorumfirst
var quorumFirst = flag.Bool("quorumfirst", false, "make the tests' Redlocks WithQuorumFirst(true)")

// newRedlock returns a Redlock over addrs with clients of its own, both
// closed when t ends.
func newRedlock(t testing.TB, addrs []string, opts ...redlock.Option) *redlock.Redlock {
	t.Helper()
	return redlockOver(t, newClients(addrs), opts...)
}

// redlockOver returns a Redlock over clients, closed with them when t
// ends (or at once if New fails).
func redlockOver(t testing.TB, clients []*redis.Client, opts ...redlock.Option) *redlock.Redlock {
	t.Helper()
	if *quorumFirst {
		opts = append([]redlock.Option{redlock.WithQuorumFirst(true)}, opts...)
	}
	rl, err := redlock.New(clients, opts...)
	if err != nil {
		closeClients(clients)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rl.Close()
		closeClients(clients)
	})
	return rl
}

// direct returns a plain go-redis client to a node's own address (not
// through its proxy), closed when t ends: the test's hand on the server.
func direct(t testing.TB, n *server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.ServerAddr(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// counter counts the connections nodes accept, through one connection
// of its own to each, opened once.
type counter []*redis.Client

// newCounter returns a counter of nodes' connections, closed when t ends.
func newCounter(t testing.TB, nodes []*server) counter {
	c := make(counter, len(nodes))
	for i, n := range nodes {
		c[i] = redis.NewClient(&redis.Options{Addr: n.ServerAddr(), MaxRetries: -1, PoolSize: 1, MinIdleConns: 1})
		t.Cleanup(func() { c[i].Close() })
	}
	c.count(t) // its own connections are open from now on
	return c
}

// count returns how many connections the nodes have accepted since they
// started (INFO stats total_connections_received, summed).
func (c counter) count(t testing.TB) int {
	t.Helper()
	total := 0
	for _, cl := range c {
		info, err := cl.Info(context.Background(), "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		v, ok := infoField(info, "total_connections_received")
		if !ok {
			t.Fatalf("no total_connections_received in INFO stats of %s", cl.Options().Addr)
		}
		i, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		total += i
	}
	return total
}

func infoField(info, name string) (string, bool) {
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// await polls cond every few milliseconds until it holds, failing t after
// within: a wait for a condition on the servers, not a sleep.
func await(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("%s: not within %v", what, within)
	}
}

// poll checks cond every few milliseconds until it holds, for within at
// most, and reports whether it did: for a caller that says itself what
// it found instead.
func poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// canonical returns the nodes in the order every client of them uses
// (by address): the first is the one contended clients ask first, and
// the first two keep the hand-off lists.
func canonical(nodes []*server) []*server {
	s := slices.Clone(nodes)
	slices.SortFunc(s, func(a, b *server) int { return strings.Compare(a.Addr(), b.Addr()) })
	return s
}

// goroutines returns the stacks of every goroutine.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// hasGoroutine reports whether a goroutine is running a function whose
// name contains fn.
func hasGoroutine(fn string) bool { return strings.Contains(goroutines(), fn) }

// compare runs the long measurements (TestHandoffTail) for this long.
var compare = flag.Duration("compare", 0, "run TestHandoffTail for this long")
