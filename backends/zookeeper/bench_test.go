package zookeeper

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/locker"
)

// The comparison with go-zookeeper's own recipe, zk.Lock, on the same
// standalone server in the same run; read the results as ratios:
//
//	go test -run '^$' -bench . -benchtime 5s -count 3 ./backends/zookeeper
//
// Each client has its own connection (a Locker, or a zk.Conn for zk.Lock),
// as separate processes would. An op is one lock + unlock; the benchmarks
// report ops/s and the op's latency percentiles (µs).

// lockFunc takes and gives back key once.
type lockFunc func(key string) error

// contender makes one client's lock function and its cleanup.
type contender struct {
	name   string
	client func(b testing.TB, addrs []string) (lockFunc, func())
}

var contenders = []contender{
	{"ours", oursClient(false)},
	// ours with a ctx that can end, as callers normally pass: each request
	// then runs on its own goroutine so that it can be abandoned.
	{"ours-ctx", oursClient(true)},
	{"zk.Lock", zkLockClient},
}

func oursClient(cancellable bool) func(b testing.TB, addrs []string) (lockFunc, func()) {
	return func(b testing.TB, addrs []string) (lockFunc, func()) {
		l := open(b, addrs, nil)
		ctx := context.Background()
		cancel := func() {}
		if cancellable {
			ctx, cancel = context.WithTimeout(ctx, time.Hour)
		}
		return func(key string) error {
				lease, err := l.Acquire(ctx, key, locker.WithTTL(time.Minute))
				if err != nil {
					return err
				}
				return lease.Release(ctx)
			}, func() {
				cancel()
				l.Close()
			}
	}
}

func zkLockClient(b testing.TB, addrs []string) (lockFunc, func()) {
	c, events, err := zk.Connect(addrs, DefaultSession, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	locks := map[string]*zk.Lock{}
	return func(key string) error {
			lk := locks[key]
			if lk == nil {
				lk = zk.NewLock(c, "/lockbench/zklock/"+escape(key), zk.WorldACL(zk.PermAll))
				locks[key] = lk
			}
			if err := lk.Lock(); err != nil {
				return err
			}
			return lk.Unlock()
		}, func() {
			c.Close()
			for range events {
			}
		}
}

// BenchmarkUncontended: one client taking and releasing its own key.
func BenchmarkUncontended(b *testing.B) {
	addrs := standalone(b)
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, addrs, c, 1) })
	}
}

// BenchmarkHotKey: 16 clients on one key.
func BenchmarkHotKey(b *testing.B) {
	addrs := standalone(b)
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, addrs, c, 16) })
	}
}

// runClients spreads b.N ops over n clients, all on one key, and reports
// throughput and latency percentiles.
func runClients(b *testing.B, addrs []string, c contender, n int) {
	key := fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano())
	fns := make([]lockFunc, n)
	for i := range fns {
		fn, cleanup := c.client(b, addrs)
		defer cleanup()
		if err := fn(key); err != nil { // connect, create the parents
			b.Fatal(err)
		}
		fns[i] = fn
	}
	var (
		next     atomic.Int64
		failures atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for _, fn := range fns {
		wg.Go(func() {
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := fn(key); err != nil {
					failures.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(failures.Load()), "failures")
}
