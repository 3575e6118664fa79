package etcd

import (
	"bufio"
	"context"
	"flag"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// The comparison with the client's own recipe, concurrency.Mutex on a
// session, on the same one-member cluster in the same run; read the
// results as ratios:
//
//	go test -run '^$' -bench . -benchtime 3s -count 3 ./backends/etcd
//
// Each client has its own etcd client (a Locker, or a clientv3.Client and
// a session for the Mutex), as separate processes would. An op is one
// lock + unlock; the benchmarks report locktest.Bench's ops/s and latency
// percentiles (µs) of the op, and the raft proposals the member committed
// per op (from its /metrics), which unlike time does not depend on what
// else the machine is doing: each is a write to the raft log, and with
// fsync on, what a lock costs.

var contenders = []locktest.Contender{
	{Name: "mutex", Client: mutexClient},
	{Name: "ours", Client: oursClient(nil)},
	// a lease granted per acquisition and revoked at release
	{Name: "ours-nopool", Client: oursClient(map[string]string{"leasepool": "0"})},
}

func oursClient(params map[string]string) func(tb testing.TB, key string) locktest.Op {
	return func(tb testing.TB, key string) locktest.Op {
		return locktest.AcquireRelease(openClosed(tb, single(tb), params), key, locker.WithTTL(time.Minute))
	}
}

func mutexClient(tb testing.TB, key string) locktest.Op {
	s, err := concurrency.NewSession(rawClient(tb, single(tb)), concurrency.WithTTL(60))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() }) // before rawClient's cleanup closes the client
	m := concurrency.NewMutex(s, "/lockbench/mutex/"+escape(key))
	return func(ctx context.Context) error {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
}

// BenchmarkUncontended: one client taking and releasing its own key.
func BenchmarkUncontended(b *testing.B) { benchContenders(b, 1) }

// BenchmarkHotKey: 16 clients on one key.
func BenchmarkHotKey(b *testing.B) { benchContenders(b, 16) }

// benchContenders runs every contender with n clients on one key,
// reporting with locktest.Bench and the raft proposals per op.
func benchContenders(b *testing.B, n int) {
	endpoint := single(b)[0]
	locktest.BenchContenders(b, contenders, n, "writes/op", func(tb testing.TB) float64 {
		return metric(tb, endpoint, "etcd_server_proposals_committed_total")
	})
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
// (locktest.Compare), so that a machine whose load changes weighs on all
// of them alike. Skipped unless asked:
//
//	go test -run InterleavedComparison -v ./backends/etcd -args -compare=60s
func TestInterleavedComparison(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare to the time per scenario")
	}
	locktest.CompareClients(t, contenders, *compare, 1, 16)
}
