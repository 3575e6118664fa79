package etcd

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockbench/lockbench/locker"
)

// The comparison with the client's own recipe, concurrency.Mutex on a
// session, on the same one-member cluster in the same run; read the
// results as ratios:
//
//	go test -run '^$' -bench . -benchtime 3s -count 3 ./backends/etcd
//
// Each client has its own etcd client (a Locker, or a clientv3.Client and
// a session for the Mutex), as separate processes would. An op is one
// lock + unlock; the benchmarks report ops/s, the latency percentiles (µs)
// of the acquisition alone, and the raft proposals the member committed
// per op (from its /metrics), which unlike time does not depend on what
// else the machine is doing: each is a write to the raft log, and with
// fsync on, what a lock costs.

// lockFunc takes key, and returns the function that gives it back.
type lockFunc func(ctx context.Context, key string) (unlock func(context.Context) error, err error)

// contender makes one client's lock function and its cleanup.
type contender struct {
	name   string
	client func(tb testing.TB, endpoints []string) (lockFunc, func())
}

var contenders = []contender{
	{"ours", oursClient(nil)},
	// a lease granted per acquisition and revoked at release
	{"ours-nopool", oursClient(map[string]string{"leasepool": "0"})},
	{"mutex", mutexClient},
}

func oursClient(params map[string]string) func(tb testing.TB, endpoints []string) (lockFunc, func()) {
	return func(tb testing.TB, endpoints []string) (lockFunc, func()) {
		l := open(tb, endpoints, params)
		return func(ctx context.Context, key string) (func(context.Context) error, error) {
				lease, err := l.Acquire(ctx, key, locker.WithTTL(time.Minute))
				if err != nil {
					return nil, err
				}
				return lease.Release, nil
			}, func() {
				if err := l.Close(); err != nil {
					tb.Error(err)
				}
			}
	}
}

func mutexClient(tb testing.TB, endpoints []string) (lockFunc, func()) {
	c := rawClient(tb, endpoints)
	s, err := concurrency.NewSession(c, concurrency.WithTTL(60))
	if err != nil {
		tb.Fatal(err)
	}
	mutexes := map[string]*concurrency.Mutex{}
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
			m := mutexes[key]
			if m == nil {
				m = concurrency.NewMutex(s, "/lockbench/mutex/"+escape(key))
				mutexes[key] = m
			}
			if err := m.Lock(ctx); err != nil {
				return nil, err
			}
			return m.Unlock, nil
		}, func() {
			s.Close() // the client is closed by rawClient's cleanup
		}
}

// BenchmarkUncontended: one client taking and releasing its own key.
func BenchmarkUncontended(b *testing.B) {
	endpoints := single(b)
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, endpoints, c, 1) })
	}
}

// BenchmarkHotKey: 16 clients on one key.
func BenchmarkHotKey(b *testing.B) {
	endpoints := single(b)
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { runClients(b, endpoints, c, 16) })
	}
}

// runClients spreads b.N ops over n clients, all on one key, and reports
// throughput, acquire latency percentiles and raft proposals per op.
func runClients(b *testing.B, endpoints []string, c contender, n int) {
	key := fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano())
	fns := clients(b, endpoints, c, n, key)
	var next atomic.Int64
	before := metric(b, endpoints[0], "etcd_server_proposals_committed_total")
	b.ResetTimer()
	lat, failures, elapsed := measure(fns, key, func() bool { return next.Add(1) <= int64(b.N) })
	b.StopTimer()
	b.ReportMetric((metric(b, endpoints[0], "etcd_server_proposals_committed_total")-before)/float64(b.N), "writes/op")
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(percentile(lat, 0.50), "p50-µs")
	b.ReportMetric(percentile(lat, 0.99), "p99-µs")
	b.ReportMetric(float64(failures), "failures")
}

// clients makes n clients of c, each having taken key once (connected),
// closed when tb ends.
func clients(tb testing.TB, endpoints []string, c contender, n int, key string) []lockFunc {
	ctx := context.Background()
	fns := make([]lockFunc, n)
	for i := range fns {
		fn, cleanup := c.client(tb, endpoints)
		tb.Cleanup(cleanup)
		unlock, err := fn(ctx, key)
		if err != nil {
			tb.Fatal(err)
		}
		if err := unlock(ctx); err != nil {
			tb.Fatal(err)
		}
		fns[i] = fn
	}
	return fns
}

// measure runs every client on its own goroutine, taking and giving back
// key while more says so, and returns the acquire latencies of the ops
// that succeeded, how many failed and how long it all took.
func measure(fns []lockFunc, key string, more func() bool) ([]time.Duration, int, time.Duration) {
	var (
		failures atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		wg       sync.WaitGroup
	)
	ctx := context.Background()
	start := time.Now()
	for _, fn := range fns {
		wg.Go(func() {
			var mine []time.Duration
			for more() {
				t0 := time.Now()
				unlock, err := fn(ctx, key)
				if err != nil {
					failures.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
				if err := unlock(ctx); err != nil {
					failures.Add(1)
				}
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

// metric returns the sum over its labels of a counter the member at
// endpoint exports on /metrics.
func metric(tb testing.TB, endpoint, name string) float64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/metrics", nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return sum
}

var compare = flag.Duration("compare", 0, "run TestInterleavedComparison for this long per scenario")

// TestInterleavedComparison measures the benchmarks' contenders in turns
// of half a second, rotating their order, so that a machine whose load
// changes (other tests, other users) weighs on all of them alike; the
// benchmarks above measure them one after the other. Skipped unless asked:
//
//	go test -run InterleavedComparison -v ./backends/etcd -args -compare=60s
func TestInterleavedComparison(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare to the time per scenario")
	}
	endpoints := single(t)
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
				runs[i] = &run{name: c.name, fns: clients(t, endpoints, c, n, key), key: key}
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
				if r.name == "mutex" {
					base = float64(len(r.lat)) / r.busy.Seconds()
				}
			}
			for _, r := range runs {
				slices.Sort(r.lat)
				ops := float64(len(r.lat)) / r.busy.Seconds()
				t.Logf("%-11s %6.0f ops/s (%.2fx mutex)  acquire p50 %6.0f µs  p99 %7.0f µs  (%d ops)",
					r.name, ops, ops/base, percentile(r.lat, 0.5), percentile(r.lat, 0.99), len(r.lat))
			}
		})
	}
}
