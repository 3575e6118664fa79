package rueidislock_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	rl "github.com/redis/rueidis/rueidislock"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	_ "github.com/lockbench/lockbench/backends/redis"
	_ "github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/backends/rueidislock"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// The comparison the issue asks for: our redis backend (the first of the
// five nodes) and our Redlock (all five) against rueidislock (the first
// node), on the same servers in one run. An op is Acquire + Release. Read
// the results as ratios between contenders of one run:
//
//	go test -run '^$' -bench . -benchtime 3s -count 3 ./backends/rueidislock
//	go test -run InterleavedComparison -v ./backends/rueidislock -args -compare=10s
//
// rueidislock runs twice: through the adapter (what lockbench measures)
// and on its own, WithContext and its cancel, as a Go service uses it.
// The benchmarks also report the Redis commands the servers processed per
// op (INFO's total_commands_processed), which unlike time does not depend
// on what else the machine is doing, and the servers' CPU time per op.

// go-redis logs dial failures to stderr, where they break up benchmark
// results; the tests report errors themselves.
func init() { goredis.SetLogger(quiet{}) }

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// contender is a lock under comparison: open makes one client (a Locker
// or rueidislock's own), with connections of its own.
type contender struct {
	name string
	// servers says which of the five nodes it uses: 1 or 5.
	servers int
	open    func(tb testing.TB, addrs []string) func(ctx context.Context, key string) error
}

// registry opens a lockbench backend and returns Acquire+Release on it.
func registry(name string, servers int, params map[string]string) contender {
	return contender{name: name, servers: servers, open: func(tb testing.TB, addrs []string) func(context.Context, string) error {
		l := backendstest.OpenClosed(tb, name, backends.Config{Addrs: addrs[:servers], Params: params})
		if a, ok := l.(*rueidislock.Locker); ok {
			adapters.Lock()
			adapters.all = append(adapters.all, a)
			adapters.Unlock()
		}
		return func(ctx context.Context, key string) error {
			return locktest.AcquireRelease(l, key, locker.WithTTL(10*time.Second))(ctx)
		}
	}}
}

// native is rueidislock on its own, with its defaults but one key, like
// the backend: WithContext, then the cancel it returns. Its waits are
// bounded like the adapter's (1 s, then WithContext again), as a service
// must bound them: a wait whose wake-up rueidislock lost lasts forever
// (see the package doc), even on a key nobody else takes — a try that
// times out before its SET reaches the server leaves nothing to
// invalidate. nativeRewaits counts the cut waits.
var native = contender{name: "rueidislock-native", servers: 1, open: func(tb testing.TB, addrs []string) func(context.Context, string) error {
	l, err := rl.NewLocker(rl.LockerOption{ClientOption: rueidis.ClientOption{InitAddress: addrs[:1]}, KeyMajority: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Close)
	return func(ctx context.Context, key string) error {
		for {
			wait, cancel := context.WithTimeout(ctx, time.Second)
			_, unlock, err := l.WithContext(wait, key)
			if err == nil {
				unlock()
				cancel()
				return nil
			}
			cancel()
			if ctx.Err() != nil {
				return err
			}
			nativeRewaits.Add(1)
		}
	}
}}

var nativeRewaits atomic.Int64

// adapters are the rueidislock backends the benchmarks opened, whose
// Rewaits they report.
var adapters struct {
	sync.Mutex
	all []*rueidislock.Locker
}

// adapterRewaits sums the adapters' cut waits.
func adapterRewaits() int64 {
	adapters.Lock()
	defer adapters.Unlock()
	var n int64
	for _, a := range adapters.all {
		n += a.Rewaits()
	}
	return n
}

var contenders = []contender{
	registry("redis", 1, nil),
	registry("redlock", 5, map[string]string{"bootstrap": "force"}),
	registry("rueidislock", 1, nil),
	native,
}

// scenario is how the clients of a comparison share Lockers and keys.
type scenario struct {
	name    string
	clients int
	shared  bool // one client (Locker) for all, as goroutines of one process
	hot     bool // all on one key
}

var scenarios = []scenario{
	{"uncontended", 1, true, true},
	{"hot/goroutines", 16, true, true},
	{"hot/processes", 16, false, true},
	{"distinct", 16, true, false},
}

// ops returns the scenario's Ops for contender c: n clients, sharing one
// client when shared, each on key or on a key of its own.
func (s scenario) ops(tb testing.TB, c contender, addrs []string, key string) []locktest.Op {
	ops := make([]locktest.Op, s.clients)
	var op func(context.Context, string) error
	for i := range ops {
		if op == nil || !s.shared {
			op = c.open(tb, addrs)
		}
		k := key
		if !s.hot {
			k = fmt.Sprintf("%s:%d", key, i)
		}
		f := op
		ops[i] = func(ctx context.Context) error { return f(ctx, k) }
		if err := ops[i](context.Background()); err != nil { // connect, load scripts
			tb.Fatalf("%s: first op: %v", c.name, err)
		}
	}
	return ops
}

func BenchmarkLock(b *testing.B) {
	addrs := nodes.Get(b)
	for _, s := range scenarios {
		for _, c := range contenders {
			b.Run(s.name+"/"+c.name, func(b *testing.B) {
				ops := s.ops(b, c, addrs, fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano()))
				cmds, cpu := serverStats(b, addrs[:c.servers])
				locktest.Bench(b, ops)
				cmds2, cpu2 := serverStats(b, addrs[:c.servers])
				b.ReportMetric(float64(cmds2-cmds)/float64(b.N), "cmds/op")
				b.ReportMetric((cpu2-cpu)*1e6/float64(b.N), "server-cpu-µs/op")
			})
		}
	}
}

// serverStats returns the commands the servers at addrs have processed
// and the CPU time (s) they have used.
func serverStats(tb testing.TB, addrs []string) (cmds int64, cpu float64) {
	tb.Helper()
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		info, err := c.Info(context.Background(), "stats", "cpu").Result()
		c.Close()
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch name {
			case "total_commands_processed":
				n, _ := strconv.ParseInt(v, 10, 64)
				cmds += n
			case "used_cpu_sys", "used_cpu_user":
				f, _ := strconv.ParseFloat(v, 64)
				cpu += f
			}
		}
	}
	return cmds, cpu
}

var compare = flag.Duration("compare", 0, "run TestInterleavedComparison for this long per contender and scenario")

// TestInterleavedComparison measures the contenders of each scenario in
// turns of half a second (locktest.Compare), so that the load other
// processes put on the machine weighs on all of them alike. Skipped
// unless asked:
//
//	go test -run InterleavedComparison -v ./backends/rueidislock -args -compare=10s
func TestInterleavedComparison(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare to the time per contender and scenario")
	}
	addrs := nodes.Get(t)
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			var cs []locktest.Contender
			for _, c := range contenders {
				// Compare asks for one client at a time: hand out the
				// scenario's clients one by one.
				var (
					once sync.Once
					ops  []locktest.Op
					next atomic.Int64
				)
				cs = append(cs, locktest.Contender{Name: c.name, Client: func(tb testing.TB, key string) locktest.Op {
					once.Do(func() { ops = s.ops(tb, c, addrs, key) })
					return ops[int(next.Add(1)-1)%len(ops)]
				}})
			}
			native, adapter := nativeRewaits.Load(), adapterRewaits()
			locktest.Compare(t, cs, s.clients, 500*time.Millisecond, *compare)
			t.Logf("waits cut after 1s: rueidislock %d, rueidislock-native %d", adapterRewaits()-adapter, nativeRewaits.Load()-native)
		})
	}
}
