package redsync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// Benchmarks of Acquire+Release through the adapter on five Redis
// masters, with redsync's defaults and with the 1 ms retry delay people
// set to make it faster. Read the results as ratios between runs on the
// same machine (backends/redlock's benchmarks put both on one chart); run
// with
//
//	go test -run '^$' -bench . -benchtime 3s ./backends/redsync
//
// Every benchmark reports ops/s and latency percentiles (µs) of one
// Acquire+Release.

// go-redis logs dial failures to stderr, where the lines break up
// benchmark results; the tests report errors themselves.
func init() { goredis.SetLogger(quiet{}) }

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var benchParams = []struct {
	name   string
	params map[string]string
}{
	{"defaults", nil},
	{"retrydelay=1ms", map[string]string{"retrydelay": "1ms"}},
}

// BenchmarkUncontended: one client, Acquire+Release of its own key.
func BenchmarkUncontended(b *testing.B) {
	_, addrs := startNodes(b, 5)
	for _, p := range benchParams {
		b.Run(p.name, func(b *testing.B) { runClients(b, addrs, p.params, 1, true, false) })
	}
}

// BenchmarkHotKey: 16 clients on one key, sharing one Locker (goroutines
// of one process) or each with its own (16 processes).
func BenchmarkHotKey(b *testing.B) {
	_, addrs := startNodes(b, 5)
	for _, p := range benchParams {
		for _, lockers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/lockers=%d", p.name, lockers), func(b *testing.B) {
				runClients(b, addrs, p.params, 16, lockers == 1, true)
			})
		}
	}
}

// runClients runs b.N Acquire+Release operations spread over n clients
// (sharing one Locker when shared) with locktest.Bench.
func runClients(b *testing.B, addrs []string, params map[string]string, n int, shared, hot bool) {
	lockers := locktest.Lockers(b, func(tb testing.TB) locker.Locker { return open(tb, addrs, params) }, n, shared)
	locktest.Bench(b, locktest.LockerOps(b, lockers, hot, locker.WithTTL(10*time.Second)))
}
