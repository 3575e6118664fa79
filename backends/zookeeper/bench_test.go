package zookeeper

import (
	"context"
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// The comparison with go-zookeeper's own recipe, zk.Lock, on the same
// standalone server (compose's default tick, fsync on) in the same run; read the
// results as ratios:
//
//	go test -run '^$' -bench . -benchtime 5s -count 3 ./backends/zookeeper
//
// Each client has its own connection (a Locker, or a zk.Conn for zk.Lock),
// as separate processes would. An op is one lock + unlock; the benchmarks
// report locktest.Bench's ops/s and latency percentiles (µs), and the
// requests the server received per op (from its mntr counters, pings
// included), which unlike time does not depend on what else the machine
// is doing.

var contenders = []locktest.Contender{
	{Name: "zk.Lock", Client: zkLockClient},
	{Name: "ours", Client: oursClient(false)},
	// ours with a ctx that can end, as callers normally pass: each request
	// then runs on its own goroutine so that it can be abandoned.
	{Name: "ours-ctx", Client: oursClient(true)},
}

func oursClient(cancellable bool) func(tb testing.TB, key string) locktest.Op {
	return func(tb testing.TB, key string) locktest.Op {
		op := locktest.AcquireRelease(openClosed(tb, benchStandalone(tb), nil), key, locker.WithTTL(time.Minute))
		if !cancellable {
			return op
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		tb.Cleanup(cancel)
		return func(context.Context) error { return op(ctx) }
	}
}

func zkLockClient(tb testing.TB, key string) locktest.Op {
	c, events, err := zk.Connect(benchStandalone(tb), DefaultSession, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		for range events {
		}
	})
	lk := zk.NewLock(c, "/lockbench/zklock/"+escape(key), zk.WorldACL(zk.PermAll))
	return func(context.Context) error {
		if err := lk.Lock(); err != nil {
			return err
		}
		return lk.Unlock()
	}
}

// warmed makes sure the server's JIT has seen the workload before the
// first contender is measured, so that running first is no handicap.
var warmed sync.Once

func warm(b *testing.B) {
	warmed.Do(func() {
		for _, c := range contenders {
			op := c.Client(b, "warm-up")
			for range 500 {
				if err := op(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkUncontended: one client taking and releasing its own key.
func BenchmarkUncontended(b *testing.B) { benchContenders(b, 1) }

// BenchmarkHotKey: 16 clients on one key.
func BenchmarkHotKey(b *testing.B) { benchContenders(b, 16) }

// benchContenders runs every contender with n clients on one key,
// reporting with locktest.Bench and the requests per op.
func benchContenders(b *testing.B, n int) {
	addr := benchStandalone(b)[0]
	warm(b)
	locktest.BenchContenders(b, contenders, n, "req/op", func(tb testing.TB) float64 {
		return float64(mntr(tb, addr, "zk_packets_received"))
	})
}

var compare = flag.Duration("compare", 0, "run TestInterleavedComparison for this long per scenario")

// TestInterleavedComparison measures the benchmarks' contenders in turns
// (locktest.Compare), so that a machine whose load changes weighs on all
// of them alike. Skipped unless asked:
//
//	go test -run InterleavedComparison -v ./backends/zookeeper -args -compare=60s
func TestInterleavedComparison(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare to the time per scenario")
	}
	locktest.CompareClients(t, contenders, *compare, 1, 16)
}
