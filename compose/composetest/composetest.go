// Package composetest is what tests need of compose: a compose.Env per
// test and servers that the tests of a package share. Whether a test may
// start servers and how long it may then run is decided by
// internal/servertest, which StartsServers and Context forward to (so
// that test helpers below compose need not import it); an Env of ForTest
// is killed at its test's deadline.
//
// A test that starts servers — through ForTest or a Shared, or by running
// something that starts them, such as a lockbench run — is marked by
// StartsServers. Under -short (make unit) it is skipped; make test runs it.
package composetest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/internal/servertest"
)

// DefaultDeadline is how long a test that starts servers may run, its
// cleanups included (servertest.DefaultDeadline).
const DefaultDeadline = servertest.DefaultDeadline

// ScaleEnv names the environment variable that multiplies every test's
// deadline (servertest.ScaleEnv).
const ScaleEnv = servertest.ScaleEnv

// StartsServers marks tb as a test that starts servers: skipped under
// -short, failed past DefaultDeadline (servertest.StartsServers).
func StartsServers(tb testing.TB) {
	tb.Helper()
	servertest.StartsServersWithin(tb, DefaultDeadline)
}

// StartsServersWithin is StartsServers with a deadline of d from now
// (servertest.StartsServersWithin).
func StartsServersWithin(tb testing.TB, d time.Duration) {
	tb.Helper()
	servertest.StartsServersWithin(tb, d)
}

// Context returns a context for the work of tb that ends a tenth of tb's
// deadline before it (servertest.Context).
func Context(tb testing.TB) context.Context {
	tb.Helper()
	return servertest.Context(tb)
}

// ForTest returns a compose.Env in a temporary directory, closed when tb
// ends; tb StartsServers. On failure the last lines of every node's log
// are written to the test log, which is usually where the reason is.
func ForTest(tb testing.TB) *compose.Env {
	tb.Helper()
	StartsServers(tb)
	e, err := compose.New(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, n := range e.Nodes() {
				tb.Logf("--- %s log (tail) ---\n%s", n.Name, n.LogTail(2048))
			}
		}
		if err := e.Close(); err != nil {
			tb.Error(err)
		}
	})
	servertest.Watch(tb, e)
	return e
}

// ProcessAlive reports whether process pid runs on this machine: it
// exists and is no zombie (one that has exited and waits to be reaped).
// Tests check with it that a server's processes went with a Kill or an
// Env's Close.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

// Children lists the processes of this machine whose parent is pid.
func Children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range entries {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// RedisClient is a client of the Redis server at addr that gives up on a
// dial or a request within timeout and never retries (a fault shows at
// once), closed when tb ends.
func RedisClient(tb testing.TB, addr string, timeout time.Duration) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: timeout, WriteTimeout: timeout, DialTimeout: timeout})
	tb.Cleanup(func() { c.Close() })
	return c
}

// NeedsPeerNetwork marks tb as a test that starts servers in network
// namespaces of their own (StartsServers), and skips it, saying why,
// where this machine cannot build them (not root, no netns, no ip
// command). A parallel test calls it after t.Parallel.
func NeedsPeerNetwork(tb testing.TB) {
	tb.Helper()
	StartsServers(tb)
	if err := compose.PeerNetworkAvailable(); err != nil {
		tb.Skip(err)
	}
}

// NeedsLazyFS skips tb, saying why, where this machine cannot mount a
// lazy filesystem (compose.LazyFSAvailable).
func NeedsLazyFS(tb testing.TB) {
	tb.Helper()
	if err := compose.LazyFSAvailable(); err != nil {
		tb.Skip(err)
	}
}
