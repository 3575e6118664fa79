package sentinel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	sentinelkind "github.com/lockbench/lockbench/kinds/sentinel"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// Benchmarks of Acquire+Release on a master with one replica, without and
// with WAIT for it. Read the results as ratios between runs on the same
// machine; run with
//
//	go test -run '^$' -bench . -benchtime 3s ./backends/sentinel
//
// Every benchmark reports ops/s and latency percentiles (µs) of one
// Acquire+Release.

// go-redis logs which sentinel it picked, and dial failures, to stderr,
// where the lines break up benchmark results; the tests report errors
// themselves.
func init() { goredis.SetLogger(quiet{}) }

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var benchParams = []map[string]string{{"wait": "0"}, {"wait": "1"}}

// BenchmarkUncontended: one client, Acquire+Release of its own key.
func BenchmarkUncontended(b *testing.B) {
	s := startSet(b, compose.Spec{}, sentinelkind.Options{})
	for _, p := range benchParams {
		b.Run("wait="+p["wait"], func(b *testing.B) { runClients(b, s, p, 1, true, false) })
	}
}

// BenchmarkHotKey: 16 clients on one key, sharing one Locker (goroutines
// of one process) or each with its own (16 processes).
func BenchmarkHotKey(b *testing.B) {
	s := startSet(b, compose.Spec{}, sentinelkind.Options{})
	for _, p := range benchParams {
		for _, shared := range []bool{true, false} {
			name := fmt.Sprintf("wait=%s/lockers=16", p["wait"])
			if shared {
				name = fmt.Sprintf("wait=%s/lockers=1", p["wait"])
			}
			b.Run(name, func(b *testing.B) { runClients(b, s, p, 16, shared, true) })
		}
	}
}

// runClients runs b.N Acquire+Release operations spread over n clients
// (sharing one Locker when shared) with locktest.Bench.
func runClients(b *testing.B, s *sentinelkind.Set, params map[string]string, n int, shared, hot bool) {
	lockers := locktest.Lockers(b, func(tb testing.TB) locker.Locker { return open(tb, s, params) }, n, shared)
	locktest.Bench(b, locktest.LockerOps(b, lockers, hot, locker.WithTTL(10*time.Second)))
}
