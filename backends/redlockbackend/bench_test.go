package redlockbackend_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker/locktest"
)

// The comparison the package documentation and the README report: our
// Redlock and redsync, the reference Go Redlock, on the same five nodes in
// the same run. Read the results as ratios; run with
//
//	go test -run '^$' -bench . -benchtime 4000x -count 3 ./backends/redlock
//
// or, interleaved (every contender measured in turns of half a second, so
// that the machine's load weighs on all alike), for the table:
//
//	go test -run InterleavedComparison -v ./backends/redlockbackend -args -compare=20s
//
// Every benchmark reports ops/s and the latency percentiles (µs) of an
// operation (Acquire + Release); the 16-process one also the connections
// the nodes accepted per 1000 operations after warm-up.

// contender builds the lock under test: one Op per client, and a cleanup.
type contender struct {
	name string
	// setup returns the clients' Ops on key (or keys, one per client,
	// when hot is false). Like a process normally does, every client
	// shares one lock instance and its connections.
	setup func(tb testing.TB, clients int, keys func(int) string) ([]locktest.Op, func())
}

func redlockContender(name string, opts ...redlock.Option) contender {
	return contender{name: name, setup: func(tb testing.TB, n int, keys func(int) string) ([]locktest.Op, func()) {
		clients := newClients(sharedAddrs(tb))
		rl, err := redlock.New(clients, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		ops := make([]locktest.Op, n)
		for i := range ops {
			ops[i] = locktest.AcquireRelease(rl, keys(i))
		}
		return ops, func() {
			rl.Close()
			closeClients(clients)
		}
	}}
}

func redsyncContender(name string, opts ...redsync.Option) contender {
	return contender{name: name, setup: func(tb testing.TB, n int, keys func(int) string) ([]locktest.Op, func()) {
		clients := newClients(sharedAddrs(tb))
		pools := make([]rsredis.Pool, len(clients))
		for i, c := range clients {
			pools[i] = rsgoredis.NewPool(c)
		}
		rs := redsync.New(pools...)
		ops := make([]locktest.Op, n)
		for i := range ops {
			key := keys(i)
			ops[i] = func(ctx context.Context) error {
				m := rs.NewMutex(key, opts...)
				if err := m.LockContext(ctx); err != nil {
					return err
				}
				_, err := m.UnlockContext(ctx)
				return err
			}
		}
		return ops, func() { closeClients(clients) }
	}}
}

var contenders = []contender{
	redlockContender("redlock"),
	redlockContender("redlock-fencing", redlock.WithFencing(true)),
	redlockContender("redlock-quorumfirst", redlock.WithQuorumFirst(true)),
	redsyncContender("redsync"),
	redsyncContender("redsync-1ms", redsync.WithRetryDelay(time.Millisecond)),
}

// BenchmarkUncontended: one client, Acquire+Release of its own key.
func BenchmarkUncontended(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { bench(b, c, 1, true, nil) })
	}
}

// BenchmarkHotKey: 16 clients on one key, in one process.
func BenchmarkHotKey(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { bench(b, c, 16, true, nil) })
	}
}

// BenchmarkHotKeyProcesses: 16 clients on one key, each with a Redlock
// (or redsync) of its own, as 16 processes would have: no local queue,
// every hand-off goes through the servers. It also reports the
// connections the nodes accepted per 1000 operations, after every client
// did one operation (a Redlock dials its connections once; a hand-off
// that dialled would show here).
func BenchmarkHotKeyProcesses(b *testing.B) {
	for _, c := range []contender{separate(contenders[0]), separate(contenders[2]), separate(contenders[3])} {
		b.Run(c.name, func(b *testing.B) {
			conns := addrCounter(b, sharedAddrs(b))
			var before int
			bench(b, c, 16, true, func() { before = conns.count(b) })
			b.ReportMetric(float64(conns.count(b)-before)*1000/float64(b.N), "conns/1k-ops")
		})
	}
}

// separate gives every client its own instance of c.
func separate(c contender) contender {
	return contender{name: c.name, setup: func(tb testing.TB, n int, keys func(int) string) ([]locktest.Op, func()) {
		ops := make([]locktest.Op, n)
		var cleanups []func()
		for i := range ops {
			one, cleanup := c.setup(tb, 1, func(int) string { return keys(i) })
			ops[i], cleanups = one[0], append(cleanups, cleanup)
		}
		return ops, func() {
			for _, f := range cleanups {
				f()
			}
		}
	}}
}

// BenchmarkDistinctKeys: 16 clients, each on its own key.
func BenchmarkDistinctKeys(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { bench(b, c, 16, false, nil) })
	}
}

// bench runs c's n clients, after a warm-up of a few operations each, all
// at once (so that contended clients have opened what they open once),
// and calls warm (if not nil) between the two.
func bench(b *testing.B, c contender, n int, hot bool, warm func()) {
	prefix := fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano())
	ops, cleanup := c.setup(b, n, keys(prefix, hot))
	defer cleanup()
	var done atomic.Int64
	if s := locktest.Measure(context.Background(), ops, func() bool { return done.Add(1) <= int64(3*n) }); s.Failures > 0 {
		b.Fatalf("warm-up: %v", s.FirstErr)
	}
	if warm != nil {
		warm()
	}
	locktest.Bench(b, ops)
}

func keys(prefix string, hot bool) func(int) string {
	return func(i int) string {
		if hot {
			return prefix
		}
		return prefix + ":" + strconv.Itoa(i)
	}
}

// addrCounter counts the connections the nodes at addrs accept, through
// one connection of its own to each, opened now.
func addrCounter(tb testing.TB, addrs []string) counter {
	c := make(counter, len(addrs))
	for i, a := range addrs {
		c[i] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, PoolSize: 1, MinIdleConns: 1})
		tb.Cleanup(func() { c[i].Close() })
	}
	c.count(tb)
	return c
}

var compare = flag.Duration("compare", 0, "run TestInterleavedComparison for this long per scenario, TestServerCostPerGrant with rounds this long")

// TestInterleavedComparison measures redlock and redsync in the
// benchmarks' scenarios, in turns of half a second (locktest.Compare), so
// that a machine whose load changes weighs on both alike; each scenario
// logs both contenders' throughput, its ratio and the p50 and p99
// latency. Skipped unless asked:
//
//	go test -run InterleavedComparison -v ./backends/redlockbackend -args -compare=20s
func TestInterleavedComparison(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare to the time per scenario")
	}
	for _, s := range []struct {
		name    string
		clients int
		shared  bool // one instance for every client, as one process
		hot     bool
	}{
		{"uncontended", 1, true, true},
		{"16 goroutines, one key", 16, true, true},
		{"16 processes, one key", 16, false, true},
		{"16 goroutines, own keys", 16, true, false},
	} {
		t.Run(s.name, func(t *testing.T) {
			var cs []locktest.Contender
			for _, c := range contenders[:4] {
				cs = append(cs, asContender(t, c, s.shared, s.hot))
			}
			conns := addrCounter(t, sharedAddrs(t))
			before := conns.count(t)
			samples := locktest.Compare(t, cs, s.clients, 500*time.Millisecond, *compare)
			total := 0
			for _, x := range samples {
				total += len(x.Latencies)
			}
			t.Logf("connections accepted by the nodes: %d for %d operations (both contenders)", conns.count(t)-before, total)
		})
	}
}

// asContender turns c into a locktest.Contender whose clients share one
// instance (shared) or each have one, on the key Compare gives (hot) or
// on a key of their own.
func asContender(t *testing.T, c contender, shared, hot bool) locktest.Contender {
	var (
		mu   sync.Mutex
		one  func(int) string
		ops  []locktest.Op
		next atomic.Int64
	)
	return locktest.Contender{Name: c.name, Client: func(tb testing.TB, key string) locktest.Op {
		i := int(next.Add(1)) - 1
		k := key
		if !hot {
			k = key + ":" + strconv.Itoa(i)
		}
		if !shared {
			op, cleanup := c.setup(tb, 1, func(int) string { return k })
			tb.Cleanup(cleanup)
			return op[0]
		}
		mu.Lock()
		defer mu.Unlock()
		if ops == nil {
			// One instance, with an Op for each of up to 64 clients.
			one = func(j int) string {
				if hot {
					return key
				}
				return key + ":" + strconv.Itoa(j)
			}
			var cleanup func()
			ops, cleanup = c.setup(t, 64, one)
			t.Cleanup(cleanup)
		}
		return ops[i]
	}}
}

// TestCPUPerOperation measures what an Acquire+Release costs in CPU, the
// client's (this process, from getrusage) and the five servers' (INFO
// cpu), for each contender in turn, rounds times, uncontended and with 16
// instances (processes) on one key: on a machine shared with other work,
// CPU per operation varies far less than time per operation, and it is
// what bounds throughput once the CPUs are saturated. Skipped unless
// -compare is set:
//
//	go test -run CPUPerOperation -v ./backends/redlockbackend -args -compare=1s
func TestCPUPerOperation(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare")
	}
	const rounds, n = 3, 3000
	for _, s := range []struct {
		name    string
		clients int
		wrap    func(contender) contender
	}{
		{"uncontended", 1, func(c contender) contender { return c }},
		{"16 processes, one key", 16, separate},
	} {
		for round := range rounds {
			for _, c := range contenders[:4] {
				c = s.wrap(c)
				ops, cleanup := c.setup(t, s.clients, keys(fmt.Sprintf("cpu:%d:%d", round, time.Now().UnixNano()), true))
				var done atomic.Int64
				if w := locktest.Measure(context.Background(), ops, func() bool { return done.Add(1) <= int64(4*s.clients) }); w.Failures > 0 {
					t.Fatal(w.FirstErr)
				}
				done.Store(0)
				s0, c0, w0 := serverCPU(t), selfCPU(), time.Now()
				m := locktest.Measure(context.Background(), ops, func() bool { return done.Add(1) <= n })
				s1, c1, w1 := serverCPU(t), selfCPU(), time.Now()
				cleanup()
				if m.Failures > 0 {
					t.Fatal(m.FirstErr)
				}
				µs := func(d float64) float64 { return d / n * 1e6 }
				t.Logf("%s, round %d: %-16s client %5.1f µs/op  servers %5.1f µs/op  wall %5.1f µs/op",
					s.name, round, c.name, µs(c1-c0), µs(s1-s0), µs(w1.Sub(w0).Seconds()))
			}
		}
	}
}

// serverCPU returns the CPU seconds the nodes at addrs have used.
func serverCPU(t testing.TB) float64 {
	total := 0.0
	for _, a := range sharedAddrs(t) {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, PoolSize: 1})
		info, err := c.Info(context.Background(), "cpu").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
			v, _ := infoField(info, f)
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu %s = %q", f, v)
			}
			total += x
		}
	}
	return total
}

// selfCPU returns the CPU seconds this process has used.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
