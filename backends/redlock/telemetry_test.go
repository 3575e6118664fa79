//go:build go1.25

package redlock_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockbench/lockbench/backends/redlock"
)

// logs is a slog handler that keeps every record, for tests.
type logs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// count returns how many records' messages contain msg.
func (l *logs) count(msg string) int {
	return len(l.matching(msg))
}

// matching returns the records whose messages contain msg, each as its
// message and attributes.
func (l *logs) matching(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		if !strings.Contains(r.Message, msg) {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.String()
			return true
		})
		out = append(out, line)
	}
	return out
}

// find returns the first record whose message contains msg and whose
// attribute node is node ("" for any), and whether there is one.
func (l *logs) find(msg, node string) (slog.Record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if !strings.Contains(r.Message, msg) {
			continue
		}
		found := node == ""
		r.Attrs(func(a slog.Attr) bool {
			found = found || (a.Key == "node" && a.Value.String() == node)
			return !found
		})
		if found {
			return r, true
		}
	}
	return slog.Record{}, false
}

// sum returns the sum of the data points of the counter or histogram
// name whose attributes include want.
func sum(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) float64 {
	total := 0.0
	match := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						total += float64(p.Value)
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						total += float64(p.Count)
					}
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						total += float64(p.Count)
					}
				}
			}
		}
	}
	return total
}

// TestTelemetry (issue 19, §4): go-redis hooks never see Redlock's
// commands, so Redlock reports them itself — spans per operation, the
// metrics its documentation lists, and log records of the events an
// operator acts on — through the providers and logger it is given.
func TestTelemetry(t *testing.T) {
	nodes, addrs := fresh(t, 5, redisOptions{})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	log := &logs{}
	rl := newRedlock(t, addrs, redlock.WithTracerProvider(tp), redlock.WithMeterProvider(mp), redlock.WithLogger(slog.New(log)))
	other := newRedlock(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for range 10 {
		lease, err := rl.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A hand-off: rl waits for a key another client holds.
	held, err := other.Acquire(ctx, "contended")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := rl.Acquire(ctx, "contended")
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	await(t, 10*time.Second, "the waiter queued", func() bool { return hasGoroutine("redlock.(*handoff).run") })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A node loses its data, another dies.
	c := canonical(nodes)
	if err := direct(t, c[0]).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c[1].Kill(); err != nil {
		t.Fatal(err)
	}
	// The flush is seen when the client reads a reply of the flushed
	// node's saying so, and a round that a fastest majority decided drops
	// the replies that come after: on a loaded machine, three operations
	// may all end before the flushed node's reply is read. What the
	// contract promises is that a client that keeps using the nodes takes
	// it out, and says so: operations go on (3 at least) until both
	// faults are reported, or the deadline, which the checks below then
	// fail.
	after := 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		lease, err := rl.Acquire(ctx, "after")
		if err != nil {
			t.Fatal(err)
		}
		lease.Release(ctx)
		after++
		_, lost := log.find("lost its data", c[0].Addr())
		_, dead := log.find("unreachable", c[1].Addr())
		if (after >= 3 && lost && dead) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d operations after the faults until both were reported", after)
	ops := 11 + after

	byName := map[string]int{}
	for _, s := range spans.Ended() {
		byName[s.Name()]++
		if s.Name() == "redlock.Acquire" && !slices.Contains(s.Attributes(), attribute.String("redlock.key", "k")) &&
			!slices.Contains(s.Attributes(), attribute.String("redlock.key", "contended")) && !slices.Contains(s.Attributes(), attribute.String("redlock.key", "after")) {
			t.Errorf("span %s without its key: %v", s.Name(), s.Attributes())
		}
	}
	if byName["redlock.Acquire"] != ops || byName["redlock.Release"] != ops {
		t.Errorf("spans %v: want %d redlock.Acquire and %d redlock.Release", byName, ops, ops)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name  string
		attrs []attribute.KeyValue
		least float64
	}{
		{"redlock.acquire.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "ok")}, float64(ops)},
		{"redlock.acquire.rounds", nil, float64(ops)},
		{"redlock.release.duration", nil, float64(ops)},
		{"redlock.handoffs", nil, 1},
		{"redlock.node.events", []attribute.KeyValue{attribute.String("redlock.event", "quarantined"), attribute.String("server.address", c[0].Addr())}, 1},
		{"redlock.node.errors", []attribute.KeyValue{attribute.String("server.address", c[1].Addr())}, 1},
	} {
		if got := sum(rm, m.name, m.attrs...); got < m.least {
			t.Errorf("metric %s %v = %v, want at least %v", m.name, m.attrs, got, m.least)
		}
	}
	if _, ok := log.find("lost its data", c[0].Addr()); !ok {
		t.Errorf("no log record of %s losing its data", c[0].Addr())
	}
	if _, ok := log.find("unreachable", c[1].Addr()); !ok {
		t.Errorf("no log record of %s dying", c[1].Addr())
	}
}

// TestGlobalProvidersByDefault: without providers, Redlock reports to the
// global OpenTelemetry providers — which record nothing until the
// application installs an SDK, even after the Redlock was made.
func TestGlobalProvidersByDefault(t *testing.T) {
	shared(t)
	rl := newRedlock(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spans := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	lease, err := rl.TryAcquire(ctx, "global")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range spans.Ended() {
		names = append(names, s.Name())
	}
	if !slices.Equal(names, []string{"redlock.TryAcquire", "redlock.Release"}) {
		t.Fatalf("spans on the global provider installed after New: %v, want redlock.TryAcquire and redlock.Release", names)
	}
}
