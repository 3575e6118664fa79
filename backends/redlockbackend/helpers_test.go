package redlockbackend_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	rediskind "github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/locker"
)

// fresh starts n new Redis masters for one test, admits them to the
// quorum once (they are new) and returns them with their addresses (the
// proxies' when s.Proxied).
func fresh(t *testing.T, n int, s compose.Spec) ([]*compose.Node, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.Nodes = n
	nodes, err := rediskind.StartServers(ctx, composetest.ForTest(t), s, rediskind.Options{})
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
//	go test ./backends/redlockbackend -args -quorumfirst
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
func direct(t testing.TB, n *compose.Node) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.ServerAddr(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// counter counts the connections nodes accept, through one connection
// of its own to each, opened once.
type counter []*redis.Client

// newCounter returns a counter of nodes' connections, closed when t ends.
func newCounter(t testing.TB, nodes []*compose.Node) counter {
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
	deadline := time.Now().Add(within)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		<-tick.C
	}
}

// canonical returns the nodes in the order every client of them uses
// (by address): the first is the one contended clients ask first, and
// the first two keep the hand-off lists.
func canonical(nodes []*compose.Node) []*compose.Node {
	s := slices.Clone(nodes)
	slices.SortFunc(s, func(a, b *compose.Node) int { return strings.Compare(a.Addr(), b.Addr()) })
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

// shared5 are five bootstrapped Redis masters the benchmarks share.
var shared5 = composetest.NewShared(func(ctx context.Context, e *compose.Env) ([]string, error) {
	nodes, err := rediskind.StartServers(ctx, e, compose.Spec{Nodes: 5}, rediskind.Options{})
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return addrs, bootstrap(ctx, addrs)
})

// sharedAddrs returns the addresses of the shared masters, started on
// first use; tb StartsServers.
func sharedAddrs(tb testing.TB) []string {
	tb.Helper()
	return shared5.Get(tb)
}

func TestMain(m *testing.M) {
	os.Exit(composetest.RunTests(m, shared5))
}

// newClients returns a client for each of addrs, each set by the
// functions with (timeouts, TLS) on top of go-redis's defaults.
func newClients(addrs []string, with ...func(*redis.Options)) []*redis.Client {
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		o := &redis.Options{Addr: a}
		for _, w := range with {
			w(o)
		}
		clients[i] = redis.NewClient(o)
	}
	return clients
}

func closeClients(clients []*redis.Client) {
	for _, c := range clients {
		c.Close()
	}
}

// bootstrap admits new nodes, which the caller has just started.
func bootstrap(ctx context.Context, addrs []string) error {
	clients := newClients(addrs)
	defer closeClients(clients)
	rl, err := redlock.New(clients)
	if err != nil {
		return err
	}
	defer rl.Close()
	return rl.Bootstrap(ctx, redlock.Force())
}

// warm opens every connection rl will keep: its pipelined ones, and the
// hand-off ones, which a first contended Acquire dials.
func warm(t *testing.T, rl *redlock.Redlock, addrs []string) {
	t.Helper()
	if _, failed, err := work(rl, "warm", 4, 100*time.Millisecond); failed > 0 {
		t.Fatalf("%d failures before the test: %v", failed, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	other := newRedlock(t, addrs)
	held, err := other.Acquire(ctx, "warm:contended", locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := rl.Acquire(ctx, "warm:contended")
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	await(t, 10*time.Second, "a hand-off wait", func() bool { return strings.Contains(goroutines(), "redlock.(*handoff).run") })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// work runs clients goroutines that take and give back keys of their own
// on rl, for d, and returns how many operations ran and failed.
func work(rl *redlock.Redlock, prefix string, clients int, d time.Duration) (ops, failed int, first error) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	stop := time.Now().Add(d)
	for c := range clients {
		wg.Go(func() {
			key := fmt.Sprintf("%s:%d", prefix, c)
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := func() error {
					lease, err := rl.Acquire(ctx, key, locker.WithTTL(5*time.Second))
					if err != nil {
						return err
					}
					return lease.Release(ctx)
				}()
				cancel()
				mu.Lock()
				ops++
				if err != nil {
					failed++
					if first == nil {
						first = err
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ops, failed, first
}
