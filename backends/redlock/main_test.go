package redlock_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/compose"
)

// addrs are the five independent Redis masters the examples and the
// conformance tests share; TestMain starts and bootstraps them. Fault
// tests start their own; env is where (see justStarted).
var (
	addrs []string
	env   *compose.Env
)

// justStarted starts n Redis servers that nobody has bootstrapped, for an
// example of the first contact, and returns their addresses. They stop
// with the test binary.
func justStarted(n int) []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := env.Redis(ctx, n, compose.RedisOptions{})
	if err != nil {
		panic(err)
	}
	addrs := make([]string, n)
	for i, nd := range nodes {
		addrs[i] = nd.Addr()
	}
	return addrs
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "redlock-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env, err = compose.New(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := env.Redis(ctx, 5, compose.RedisOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}

	// The nodes are new: admit them to the quorum now rather than after
	// one max TTL. They have just started, so Bootstrap must be forced.
	if err := bootstrap(ctx, addrs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
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
