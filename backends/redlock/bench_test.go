package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
)

// The comparison the package README reports: our Redlock and redsync, the
// reference Go Redlock, on the same five nodes in the same run. Read the
// results as ratios; run with
//
//	go test -run '^$' -bench . -benchtime 3s ./backends/redlock
//
// Every benchmark reports ops/s and acquire-latency percentiles (µs).

// lockFunc takes and gives back one lock on key, from client c.
type lockFunc func(ctx context.Context, c, key string) error

// contender builds the lock under test for n concurrent clients.
type contender struct {
	name string
	// setup returns the lock function and a cleanup. shared: one lock
	// instance (one connection set) for every goroutine, as a process
	// normally has.
	setup func(b *testing.B) (lockFunc, func())
}

func redlockContender(name string, opts ...redlock.Option) contender {
	return contender{name: name, setup: func(b *testing.B) (lockFunc, func()) {
		clients := newClients(addrs)
		rl, err := redlock.New(clients, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return func(ctx context.Context, _, key string) error {
				lease, err := rl.Acquire(ctx, key)
				if err != nil {
					return err
				}
				return lease.Release(ctx)
			}, func() {
				rl.Close()
				closeClients(clients)
			}
	}}
}

func redsyncContender(name string, opts ...redsync.Option) contender {
	return contender{name: name, setup: func(b *testing.B) (lockFunc, func()) {
		clients := newClients(addrs)
		pools := make([]rsredis.Pool, len(clients))
		for i, c := range clients {
			pools[i] = rsgoredis.NewPool(c)
		}
		rs := redsync.New(pools...)
		return func(ctx context.Context, _, key string) error {
				m := rs.NewMutex(key, opts...)
				if err := m.LockContext(ctx); err != nil {
					return err
				}
				_, err := m.UnlockContext(ctx)
				return err
			}, func() {
				closeClients(clients)
			}
	}}
}

var contenders = []contender{
	redlockContender("redlock"),
	redlockContender("redlock-fencing", redlock.WithFencing(true)),
	redsyncContender("redsync"),
	redsyncContender("redsync-1ms", redsync.WithRetryDelay(time.Millisecond)),
}

// BenchmarkUncontended: one client, Acquire+Release of its own key.
func BenchmarkUncontended(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, c, 1, false) })
	}
}

// BenchmarkHotKey: 16 clients on one key.
func BenchmarkHotKey(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, c, 16, true) })
	}
}

// BenchmarkDistinctKeys: 16 clients, each on its own key.
func BenchmarkDistinctKeys(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, c, 16, false) })
	}
}

// runClients runs b.N lock+unlock operations spread over n goroutines
// and reports throughput, latency percentiles and failures.
func runClients(b *testing.B, c contender, n int, hot bool) {
	lock, cleanup := c.setup(b)
	defer cleanup()
	ctx := context.Background()
	prefix := fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano())
	var (
		next     atomic.Int64
		failures atomic.Int64
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
		wg.Go(func() {
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := lock(ctx, fmt.Sprint(w), key); err != nil {
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
	b.ReportMetric(pct(0.999), "p999-µs")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	}
	b.ReportMetric(float64(failures.Load()), "failures")
}
