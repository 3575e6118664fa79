package redsync_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/locker"
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

// runClients runs b.N Acquire+Release operations spread over n
// goroutines and reports throughput, latency percentiles and failures.
func runClients(b *testing.B, addrs []string, params map[string]string, n int, shared, hot bool) {
	lockers := make([]locker.Locker, n)
	for i := range lockers {
		if shared && i > 0 {
			lockers[i] = lockers[0]
			continue
		}
		lockers[i] = open(b, addrs, params)
		defer lockers[i].Close()
	}
	ctx := context.Background()
	prefix := fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano())
	var (
		next     atomic.Int64
		failures atomic.Int64
		firstErr atomic.Value
		mu       sync.Mutex
		lat      []time.Duration
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for w := range n {
		key := fmt.Sprintf("%s:%d", prefix, w)
		if hot {
			key = prefix
		}
		l := lockers[w]
		wg.Go(func() {
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				lease, err := l.Acquire(ctx, key, locker.WithTTL(10*time.Second))
				if err == nil {
					err = lease.Release(ctx)
				}
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
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
	report(b, lat, elapsed, failures.Load())
	if err, ok := firstErr.Load().(error); ok {
		b.Logf("first of %d failures: %v", failures.Load(), err)
	}
}

// report adds throughput, latency percentiles and failures to b's result.
func report(b *testing.B, lat []time.Duration, elapsed time.Duration, failures int64) {
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
	b.ReportMetric(pct(0.999), "p999-µs")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	}
	b.ReportMetric(float64(failures), "failures")
}
