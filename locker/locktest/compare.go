package locktest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Contender is one of the locks a comparison measures, such as a backend
// and the client library's own recipe on the same servers.
type Contender struct {
	// Name labels the contender's sub-benchmarks and log lines.
	Name string
	// Client returns a new client's Op on key, with a connection of its
	// own as a separate process would have, closed when tb ends.
	Client func(tb testing.TB, key string) Op
}

// Clients returns n clients of c on key, each having done one operation,
// so that connecting and creating parents are not measured.
func Clients(tb testing.TB, c Contender, key string, n int) []Op {
	tb.Helper()
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = c.Client(tb, key)
		if err := ops[i](context.Background()); err != nil {
			tb.Fatalf("%s: first operation: %v", c.Name, err)
		}
	}
	return ops
}

// Compare measures the contenders, n clients each on a key of its own, in
// turns of slice (a turn starts at least n operations, so that a busy
// machine that starts the clients late still measures something),
// rotating their order, until each has run for total: a machine whose
// load changes (other tests, other users) then weighs on all of them
// alike, where benchmarks measure one after the other. It logs each one's
// throughput, as a ratio to the first contender's too, and its p50 and
// p99 latency, and returns the samples in the contenders' order. An
// operation that fails fails the test.
func Compare(t *testing.T, contenders []Contender, n int, slice, total time.Duration) []Sample {
	t.Helper()
	clients := make([][]Op, len(contenders))
	for i, c := range contenders {
		key := fmt.Sprintf("compare:%s:%d:%s:%d", t.Name(), n, c.Name, time.Now().UnixNano())
		clients[i] = Clients(t, c, key, n)
	}
	samples := make([]Sample, len(contenders))
	short := func(s Sample) bool { return s.Elapsed < total }
	for round := 0; slices.ContainsFunc(samples, short); round++ {
		for k := range contenders {
			i := (k + round) % len(contenders)
			stop := time.Now().Add(slice)
			var first atomic.Int64
			s := Measure(context.Background(), clients[i], func() bool {
				return first.Add(1) <= int64(n) || time.Now().Before(stop)
			})
			if s.Failures > 0 {
				t.Fatalf("%s: %d ops failed, the first: %v", contenders[i].Name, s.Failures, s.FirstErr)
			}
			samples[i].add(s)
		}
	}
	for i := range samples {
		slices.Sort(samples[i].Latencies)
	}
	base := samples[0].Throughput()
	for i, s := range samples {
		t.Logf("%-12s %6.0f ops/s (%.2fx %s)  p50 %6d µs  p99 %7d µs  (%d ops)",
			contenders[i].Name, s.Throughput(), s.Throughput()/base, contenders[0].Name,
			s.Percentile(0.5).Microseconds(), s.Percentile(0.99).Microseconds(), len(s.Latencies))
	}
	return samples
}

// BenchContenders runs each contender as a sub-benchmark of b, n clients
// on a key of its own, measured by Bench. With count set it also reports
// what count reads from the servers — a counter of their work, such as
// the writes they committed — per operation under unit: unlike time, it
// does not depend on what else the machine is doing.
func BenchContenders(b *testing.B, contenders []Contender, n int, unit string, count func(testing.TB) float64) {
	b.Helper()
	for _, c := range contenders {
		b.Run(c.Name, func(b *testing.B) {
			key := fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano())
			ops := Clients(b, c, key, n)
			var before float64
			if count != nil {
				before = count(b)
			}
			Bench(b, ops)
			if count != nil {
				b.ReportMetric((count(b)-before)/float64(b.N), unit)
			}
		})
	}
}

// CompareClients runs Compare on the contenders as a subtest of t for
// each number of clients in ns, in turns of half a second, each
// contender for total in each.
func CompareClients(t *testing.T, contenders []Contender, total time.Duration, ns ...int) {
	t.Helper()
	for _, n := range ns {
		t.Run(fmt.Sprintf("clients=%d", n), func(t *testing.T) {
			Compare(t, contenders, n, 500*time.Millisecond, total)
		})
	}
}
