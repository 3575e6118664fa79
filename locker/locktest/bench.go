package locktest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Op is one benchmarked operation, typically taking a lock and giving it
// back. Bench gives each client its own Op.
type Op func(ctx context.Context) error

// AcquireRelease returns an Op that acquires key on l and releases it.
func AcquireRelease(l locker.Locker, key string, opts ...locker.Option) Op {
	return func(ctx context.Context) error {
		lease, err := l.Acquire(ctx, key, opts...)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	}
}

// Bench runs b.N operations spread over the clients (one goroutine per
// Op) and reports, benchstat-readable, the throughput (ops/s), the
// latency of an operation (p50, p99, p99.9 and max, in µs) and how many
// failed. The backend benchmarks of every package use it, so that their
// numbers mean the same thing; compare them as ratios between contenders
// measured in the same run, never as absolute times.
func Bench(b *testing.B, clients []Op) {
	b.Helper()
	ctx := context.Background()
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
	for _, op := range clients {
		wg.Go(func() {
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := op(ctx); err != nil {
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
	b.ReportMetric(float64(failures.Load()), "failures")
	if err, ok := firstErr.Load().(error); ok {
		b.Logf("first of %d failures: %v", failures.Load(), err)
	}
}
