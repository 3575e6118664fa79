package redlockbackend_test

import (
	"context"
	"fmt"
	"os"
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
// their process CPU (from /proc/PID/stat) and INFO commandstats (per
// command, the calls and µs per call; a script's µs include the commands
// it calls, which are also counted on their own). At the end, the ratios
// over the rounds after the first, and the load average. Skipped unless
// asked:
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
	type sums struct{ ops, secs, cpu, script float64 }
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
			cpu0, stats0 := procCPU(t, pids), commandStats(t, addrs)
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
			cpu1, stats1 := procCPU(t, pids), commandStats(t, addrs)
			cpu := (cpu1 - cpu0) / float64(n) * 1e6
			d := stats1.sub(stats0)
			script := d["evalsha"][1] // redlock: the scripts, whose µs include the commands they call
			if name == "redsync" {
				script += d["set"][1] // redsync's SET NX PX is a command of its own
			}
			if round > 0 {
				total[i].ops += float64(n)
				total[i].secs += secs
				total[i].cpu += cpu1 - cpu0
				total[i].script += script
			}
			t.Logf("round %d: %-8s %6.0f ops/s; servers' CPU %6.1f µs/op (5 nodes); commandstats per op: %s",
				round, name, float64(n)/secs, cpu, d.per(n))
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	r, s := total[0], total[1]
	t.Logf("rounds 1-%d, redlock / redsync: ops/s %.2fx; servers' CPU per op %.2fx; commands' µs per op (top level) %.2fx; load average %s",
		rounds-1, (r.ops/r.secs)/(s.ops/s.secs), (r.cpu/r.ops)/(s.cpu/s.ops), (r.script/r.ops)/(s.script/s.ops),
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

// procCPU returns the CPU seconds the processes pids have used, from
// /proc/PID/stat (utime + stime, in clock ticks of 1/100 s).
func procCPU(t testing.TB, pids []int) float64 {
	total := 0.0
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// The fields after the command's name, which is in parentheses:
		// utime and stime are the 14th and 15th of the line.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		for _, s := range f[11:13] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("/proc/%d/stat: %v", pid, err)
			}
			total += v / 100
		}
	}
	return total
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
