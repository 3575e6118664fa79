package redlockbackend_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	rediskind "github.com/lockbench/lockbench/kinds/redis"
)

// TestServerCostPerGrant measures our Redlock against redsync as a user's
// program would: five redis-server processes of its own, the documented
// constructor (redlock.New over one *redis.Client per node, default
// options; redsync.New over go-redis pools, default options), and
// workers doing Acquire + Release of one key, each with an instance and
// clients of its own: one worker (uncontended), then 16 (a hot key).
// Rounds of -compare each alternate between the two. Per round it logs
// the ops/s, and what the servers spent per operation as they see it:
// their process CPU and wake-ups (see procStat) and INFO commandstats
// (per command, the calls and µs per call; a script's µs include the
// commands it calls, which are also counted on their own). At the end,
// the ratios over the rounds after the first, and the load average.
// Skipped unless asked:
//
//	LOCKBENCH_TEST_DEADLINE_SCALE=10 go test -run ServerCostPerGrant -v \
//	    ./backends/redlockbackend -args -compare=3s
func TestServerCostPerGrant(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare to the length of a round")
	}
	ctx := context.Background()
	nodes, err := rediskind.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 5}, rediskind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, len(nodes))
	pids := make([]int, len(nodes))
	for i, nd := range nodes {
		addrs[i] = nd.Addr()
		c := redis.NewClient(&redis.Options{Addr: nd.Addr()})
		info, err := c.Info(ctx, "server").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if pids[i], err = strconv.Atoi(infoValue(info, "process_id")); err != nil {
			t.Fatalf("process_id: %v", err)
		}
	}
	boot := newClients(addrs)
	rl, err := redlock.New(boot)
	if err != nil {
		t.Fatal(err)
	}
	err = rl.Bootstrap(ctx, redlock.Force())
	rl.Close()
	closeClients(boot)
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 16} {
		t.Run(fmt.Sprintf("%d workers, one key", workers), func(t *testing.T) {
			serverCost(t, addrs, pids, workers)
		})
	}
}

// costOp is one worker's Acquire + Release of key.
type costOp func(ctx context.Context, key string) error

// costContender makes a worker's costOp, over clients of its own.
type costContender struct {
	name string
	op   func(t *testing.T, addrs []string) costOp
}

var costContenders = []costContender{
	{"redlock", func(t *testing.T, addrs []string) costOp {
		clients := newClients(addrs)
		t.Cleanup(func() { closeClients(clients) })
		rl, err := redlock.New(clients)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rl.Close() })
		return func(ctx context.Context, key string) error {
			lease, err := rl.Acquire(ctx, key)
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		}
	}},
	{"redsync", func(t *testing.T, addrs []string) costOp {
		clients := newClients(addrs)
		t.Cleanup(func() { closeClients(clients) })
		pools := make([]rsredis.Pool, len(clients))
		for i, c := range clients {
			pools[i] = rsgoredis.NewPool(c)
		}
		rs := redsync.New(pools...)
		return func(ctx context.Context, key string) error {
			m := rs.NewMutex(key)
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			_, err := m.UnlockContext(ctx)
			return err
		}
	}},
}

// serverCost runs TestServerCostPerGrant's rounds with workers workers.
func serverCost(t *testing.T, addrs []string, pids []int, workers int) {
	const rounds = 4
	ctx := context.Background()
	ops := make([][]costOp, len(costContenders))
	for i, c := range costContenders {
		for range workers {
			ops[i] = append(ops[i], c.op(t, addrs))
		}
	}
	type sums struct{ ops, secs, cpu, wakeups, script float64 }
	total := make([]sums, len(costContenders))
	for round := range rounds {
		for k := range costContenders {
			i := (k + round) % len(costContenders) // who goes first alternates too
			name := costContenders[i].name
			key := fmt.Sprintf("cost:%s:%d", name, time.Now().UnixNano())
			for range 20 { // warm up
				if err := ops[i][0](ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			use0, stats0 := procStat(t, pids), commandStats(t, addrs)
			start := time.Now()
			var (
				wg    sync.WaitGroup
				count atomic.Int64
				first atomic.Value
			)
			for _, op := range ops[i] {
				wg.Go(func() {
					for time.Since(start) < *compare {
						if err := op(ctx, key); err != nil {
							first.CompareAndSwap(nil, err)
							return
						}
						count.Add(1)
					}
				})
			}
			wg.Wait()
			if err := first.Load(); err != nil {
				t.Fatal(err)
			}
			n := int(count.Load())
			secs := time.Since(start).Seconds()
			use1, stats1 := procStat(t, pids), commandStats(t, addrs)
			cpu := (use1.cpu - use0.cpu) / float64(n) * 1e6
			d := stats1.sub(stats0)
			script := d["evalsha"][1] // redlock: the scripts, whose µs include the commands they call
			if name == "redsync" {
				script += d["set"][1] // redsync's SET NX PX is a command of its own
			}
			if round > 0 {
				total[i].ops += float64(n)
				total[i].secs += secs
				total[i].cpu += use1.cpu - use0.cpu
				total[i].wakeups += use1.wakeups - use0.wakeups
				total[i].script += script
			}
			t.Logf("round %d: %-8s %6.0f ops/s; servers' CPU %6.1f µs/op (5 nodes), %4.1f wake-ups/op; commandstats per op: %s",
				round, name, float64(n)/secs, cpu, (use1.wakeups-use0.wakeups)/float64(n), d.per(n))
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	r, s := total[0], total[1]
	t.Logf("rounds 1-%d, redlock / redsync: ops/s %.2fx; servers' CPU per op %.2fx; their wake-ups per op %.2fx; commands' µs per op (top level) %.2fx; load average %s",
		rounds-1, (r.ops/r.secs)/(s.ops/s.secs), (r.cpu/r.ops)/(s.cpu/s.ops), (r.wakeups/r.ops)/(s.wakeups/s.ops), (r.script/r.ops)/(s.script/s.ops),
		strings.Join(strings.Fields(string(load))[:3], " "))
}

// infoValue returns the value of field name in an INFO answer.
func infoValue(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v
		}
	}
	return ""
}

// procUse is what the server processes have used: their CPU seconds
// and how many times they went to sleep waiting (voluntary context
// switches: an idle server sleeps in epoll_wait, so each is a wake-up).
type procUse struct{ cpu, wakeups float64 }

// procStat returns the use of the processes pids, summed over their
// threads: the CPU from /proc/PID/task/TID/schedstat (nanoseconds on the
// CPU; /proc/PID/stat counts clock ticks of 10 ms, coarse against a
// round's second or so of servers' CPU), the wake-ups from its status.
func procStat(t testing.TB, pids []int) procUse {
	var u procUse
	for _, pid := range pids {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("the threads of process %d: %v", pid, err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile(task + "/schedstat")
			if err != nil {
				continue // the thread ended
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				t.Fatalf("%s/schedstat is empty", task)
			}
			ns, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				t.Fatalf("%s/schedstat %q: %v", task, b, err)
			}
			u.cpu += ns / 1e9
			status, err := os.ReadFile(task + "/status")
			if err != nil {
				continue
			}
			v := infoValue(string(status), "voluntary_ctxt_switches")
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s/status: voluntary_ctxt_switches %q: %v", task, v, err)
			}
			u.wakeups += n
		}
	}
	return u
}

// cmdStats is the sum over nodes of INFO commandstats: per command, its
// calls and µs.
type cmdStats map[string][2]float64

func commandStats(t testing.TB, addrs []string) cmdStats {
	s := cmdStats{}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, PoolSize: 1})
		info, err := c.Info(context.Background(), "commandstats").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			name = strings.TrimPrefix(name, "cmdstat_")
			v := s[name]
			for kv := range strings.SplitSeq(rest, ",") {
				k, x, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(x, 64)
				switch k {
				case "calls":
					v[0] += f
				case "usec":
					v[1] += f
				}
			}
			s[name] = v
		}
	}
	return s
}

// sub returns what s counts beyond before.
func (s cmdStats) sub(before cmdStats) cmdStats {
	d := cmdStats{}
	for name, v := range s {
		d[name] = [2]float64{v[0] - before[name][0], v[1] - before[name][1]}
	}
	return d
}

// per renders, per operation of n, the calls and µs per call of the
// commands called at least every other operation.
func (s cmdStats) per(n int) string {
	var parts []string
	for name, v := range s {
		if v[0] < float64(n)/2 || name == "info" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f×%.1fµs", name, v[0]/float64(n), v[1]/v[0]))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
