package locktest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Op is one benchmarked operation, typically taking a lock and giving it
// back. Each client has its own Op.
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

// Lockers returns n Lockers made by open: n separate ones, as separate
// processes would have, or when shared one Locker n times, as goroutines
// of one process would. Each is closed when tb ends.
func Lockers(tb testing.TB, open func(tb testing.TB) locker.Locker, n int, shared bool) []locker.Locker {
	tb.Helper()
	lockers := make([]locker.Locker, n)
	for i := range lockers {
		if shared && i > 0 {
			lockers[i] = lockers[0]
			continue
		}
		l := open(tb)
		tb.Cleanup(func() {
			if err := l.Close(); err != nil {
				tb.Error(err)
			}
		})
		lockers[i] = l
	}
	return lockers
}

// LockerOps returns an AcquireRelease Op per Locker: all on one key when
// hot, else each on a key of its own. The keys are new to tb.
func LockerOps(tb testing.TB, lockers []locker.Locker, hot bool, opts ...locker.Option) []Op {
	prefix := fmt.Sprintf("bench:%s:%d", tb.Name(), time.Now().UnixNano())
	ops := make([]Op, len(lockers))
	for i, l := range lockers {
		key := prefix
		if !hot {
			key = fmt.Sprintf("%s:%d", prefix, i)
		}
		ops[i] = AcquireRelease(l, key, opts...)
	}
	return ops
}

// Sample is what Measure observed.
type Sample struct {
	// Latencies of the operations that succeeded, in ascending order.
	Latencies []time.Duration
	// Failures counts the operations that returned an error; FirstErr is
	// the first of them.
	Failures int
	FirstErr error
	// Elapsed is the wall time from the first operation's start to the
	// last one's end.
	Elapsed time.Duration
}

// Throughput is the successful operations per second.
func (s Sample) Throughput() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(len(s.Latencies)) / s.Elapsed.Seconds()
}

// Percentile returns the latency below which a fraction p (0 to 1) of
// the successful operations fall; 0 when none succeeded.
func (s Sample) Percentile(p float64) time.Duration {
	if len(s.Latencies) == 0 {
		return 0
	}
	return s.Latencies[min(len(s.Latencies)-1, int(p*float64(len(s.Latencies))))]
}

// add accumulates o into s, s's elapsed extended by o's. It leaves
// s.Latencies unsorted: the caller sorts once it has added everything.
func (s *Sample) add(o Sample) {
	s.Latencies = append(s.Latencies, o.Latencies...)
	s.Failures += o.Failures
	if s.FirstErr == nil {
		s.FirstErr = o.FirstErr
	}
	s.Elapsed += o.Elapsed
}

// Measure runs each client on a goroutine of its own, one operation after
// another while more returns true (more is called concurrently, before
// every operation), and returns what it observed.
func Measure(ctx context.Context, clients []Op, more func() bool) Sample {
	var (
		failures atomic.Int64
		firstErr atomic.Value
		mu       sync.Mutex
		lat      []time.Duration
		wg       sync.WaitGroup
	)
	start := time.Now()
	for _, op := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for more() {
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
		}()
	}
	wg.Wait()
	s := Sample{Latencies: lat, Failures: int(failures.Load()), Elapsed: time.Since(start)}
	s.FirstErr, _ = firstErr.Load().(error)
	slices.Sort(s.Latencies)
	return s
}

// Bench runs b.N operations spread over the clients (one goroutine per
// Op) and reports, benchstat-readable, the throughput (ops/s), the
// latency of an operation (p50, p99, p99.9 and max, in µs) and how many
// failed. The backend benchmarks of every package use it, so that their
// numbers mean the same thing; compare them as ratios between contenders
// measured in the same run, never as absolute times.
func Bench(b *testing.B, clients []Op) {
	b.Helper()
	var next atomic.Int64
	b.ResetTimer()
	s := Measure(context.Background(), clients, func() bool { return next.Add(1) <= int64(b.N) })
	b.StopTimer()
	µs := func(d time.Duration) float64 { return float64(d.Microseconds()) }
	b.ReportMetric(s.Throughput(), "ops/s")
	b.ReportMetric(µs(s.Percentile(0.50)), "p50-µs")
	b.ReportMetric(µs(s.Percentile(0.99)), "p99-µs")
	b.ReportMetric(µs(s.Percentile(0.999)), "p999-µs")
	b.ReportMetric(µs(s.Percentile(1)), "max-µs")
	b.ReportMetric(float64(s.Failures), "failures")
	if s.FirstErr != nil {
		b.Logf("first of %d failures: %v", s.Failures, s.FirstErr)
	}
}
