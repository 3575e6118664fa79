package zookeeper

import (
	"context"
	"flag"
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
// standalone server (default tick, fsync on) in the same run; read the results as ratios:
//
//	go test -run '^$' -bench . -benchtime 5s -count 3 ./backends/zookeeper
//
// Each client has its own connection (a Locker, or a zk.Conn for zk.Lock),
// as separate processes would. An op is one lock + unlock; the benchmarks
// report ops/s, the op's latency percentiles (µs) and the requests the
// server received per op (from its mntr counters, pings included), which
// unlike time does not depend on what else the machine is doing.

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

// warmed makes sure the server's JIT has seen the workload before the
// first contender is measured, so that running first is no handicap.
var warmed sync.Once

func warm(b *testing.B, addrs []string) {
	warmed.Do(func() {
		for _, c := range contenders {
			fn, cleanup := c.client(b, addrs)
			for range 500 {
				if err := fn("warm-up"); err != nil {
					b.Fatal(err)
				}
			}
			cleanup()
		}
	})
}

// BenchmarkUncontended: one client taking and releasing its own key.
func BenchmarkUncontended(b *testing.B) {
	addrs := benchStandalone(b)
	warm(b, addrs)
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, addrs, c, 1) })
	}
}

// BenchmarkHotKey: 16 clients on one key.
func BenchmarkHotKey(b *testing.B) {
	addrs := benchStandalone(b)
	warm(b, addrs)
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, addrs, c, 16) })
	}
}

// runClients spreads b.N ops over n clients, all on one key, and reports
// throughput and latency percentiles.
func runClients(b *testing.B, addrs []string, c contender, n int) {
	key := fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano())
	fns := clients(b, addrs, c, n, key)
	var next atomic.Int64
	before := mntr(b, addrs[0], "zk_packets_received")
	b.ResetTimer()
	lat, failures, elapsed := measure(fns, key, func() bool { return next.Add(1) <= int64(b.N) })
	b.StopTimer()
	b.ReportMetric(float64(mntr(b, addrs[0], "zk_packets_received")-before)/float64(b.N), "req/op")
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(percentile(lat, 0.50), "p50-µs")
	b.ReportMetric(percentile(lat, 0.99), "p99-µs")
	b.ReportMetric(float64(failures), "failures")
}

// clients makes n clients of c, each having taken key once (connected,
// parents created), closed when tb ends.
func clients(tb testing.TB, addrs []string, c contender, n int, key string) []lockFunc {
	fns := make([]lockFunc, n)
	for i := range fns {
		fn, cleanup := c.client(tb, addrs)
		tb.Cleanup(cleanup)
		if err := fn(key); err != nil {
			tb.Fatal(err)
		}
		fns[i] = fn
	}
	return fns
}

// measure runs every client on its own goroutine, taking key while more
// says so, and returns the latencies of the ops that succeeded, how many
// failed and how long it all took.
func measure(fns []lockFunc, key string, more func() bool) ([]time.Duration, int, time.Duration) {
	var (
		failures atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		wg       sync.WaitGroup
	)
	start := time.Now()
	for _, fn := range fns {
		wg.Go(func() {
			var mine []time.Duration
			for more() {
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
	return lat, int(failures.Load()), time.Since(start)
}

// percentile returns the p-th percentile of sorted latencies, in µs.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[min(len(sorted)-1, int(p*float64(len(sorted))))].Microseconds())
}

var compare = flag.Duration("compare", 0, "run TestInterleavedComparison for this long per scenario")

// TestInterleavedComparison measures the benchmarks' contenders in turns
// of half a second, rotating their order, so that a machine whose load
// changes (other tests, other users) weighs on all of them alike; the
// benchmarks above measure them one after the other. Skipped unless asked:
//
//	go test -run InterleavedComparison -v ./backends/zookeeper -args -compare=60s
func TestInterleavedComparison(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare to the time per scenario")
	}
	addrs := benchStandalone(t)
	for _, n := range []int{1, 16} {
		t.Run(fmt.Sprintf("clients=%d", n), func(t *testing.T) {
			type run struct {
				name string
				fns  []lockFunc
				key  string
				lat  []time.Duration
				busy time.Duration
			}
			runs := make([]*run, len(contenders))
			for i, c := range contenders {
				key := fmt.Sprintf("compare:%d:%s:%d", n, c.name, time.Now().UnixNano())
				runs[i] = &run{name: c.name, fns: clients(t, addrs, c, n, key), key: key}
			}
			start := time.Now()
			for round := 0; time.Since(start) < *compare; round++ {
				for k := range runs {
					r := runs[(k+round)%len(runs)]
					stop := time.Now().Add(500 * time.Millisecond)
					lat, failures, took := measure(r.fns, r.key, func() bool { return time.Now().Before(stop) })
					if failures > 0 {
						t.Fatalf("%s: %d ops failed", r.name, failures)
					}
					r.lat, r.busy = append(r.lat, lat...), r.busy+took
				}
			}
			var base float64
			for _, r := range runs {
				if r.name == "zk.Lock" {
					base = float64(len(r.lat)) / r.busy.Seconds()
				}
			}
			for _, r := range runs {
				slices.Sort(r.lat)
				ops := float64(len(r.lat)) / r.busy.Seconds()
				t.Logf("%-8s %6.0f ops/s (%.2fx zk.Lock)  p50 %6.0f µs  p99 %7.0f µs  (%d ops)",
					r.name, ops, ops/base, percentile(r.lat, 0.5), percentile(r.lat, 0.99), len(r.lat))
			}
		})
	}
}
