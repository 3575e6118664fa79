//go:build go1.25

package redlock_test

import (
	"context"
	"flag"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
)

// addrs are the five independent Redis masters the examples and the
// conformance tests share, started and bootstrapped by the first test
// that calls shared (nil until then). Fault tests start their own.
var (
	addrs []string

	sharedOnce    sync.Once
	sharedErr     error
	sharedServers []*server // killed by TestMain
	sharedDir     string
)

// shared starts the five shared masters on first use, and returns their
// addresses (also in addrs). Under -short it skips tb: they are servers.
func shared(tb testing.TB) []string {
	tb.Helper()
	startsServers(tb)
	sharedOnce.Do(func() { sharedErr = startShared() })
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return addrs
}

func startShared() error {
	dir, err := os.MkdirTemp("", "redlock-test-")
	if err != nil {
		return err
	}
	sharedDir = dir
	servers, err := launch(dir, 5, redisOptions{})
	sharedServers = append(sharedServers, servers...)
	if err != nil {
		return err
	}
	var a []string
	for _, s := range servers {
		a = append(a, s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The nodes are new: admit them to the quorum now rather than after
	// one max TTL. They have just started, so Bootstrap must be forced.
	if err := bootstrap(ctx, a); err != nil {
		return err
	}
	addrs = a
	return nil
}

// justStarted starts n Redis servers that nobody has bootstrapped, for an
// example of the first contact, and returns their addresses. They stop
// with the test binary.
func justStarted(n int) []string {
	if sharedDir == "" {
		panic("justStarted before shared")
	}
	dir, err := os.MkdirTemp(sharedDir, "just-")
	if err != nil {
		panic(err)
	}
	servers, err := launch(dir, n, redisOptions{})
	sharedServers = append(sharedServers, servers...)
	if err != nil {
		panic(err)
	}
	addrs := make([]string, n)
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The examples talk to the shared servers and cannot skip
		// themselves: under -short (make unit) they do not run, and no
		// server starts.
		if flag.Lookup("test.skip").Value.String() == "" {
			flag.Set("test.skip", "^Example")
		}
	} else {
		// Without -short the examples run, and they cannot ask for the
		// servers themselves: start them before any test or example.
		sharedOnce.Do(func() { sharedErr = startShared() })
	}
	code := m.Run()
	for _, s := range sharedServers {
		s.Kill()
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
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
