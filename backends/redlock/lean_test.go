//go:build go1.25

package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestLeanPath (issue 29): an uncontended Acquire + Release with default
// options costs each node three plain commands and the
// release script, as INFO commandstats counts them: no acquire script
// (none of its record writes, queue checks or counters).
func TestLeanPath(t *testing.T) {
	a := shared(t)
	rl := newRedlock(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := fmt.Sprintf("lean:%d", time.Now().UnixNano())
	op := func() {
		lease, err := rl.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	count := commandsPerOp(t, a, op)
	per := map[string]float64{}
	total := 0.0
	for name := range commandStats(t, a) {
		if name == "info" || name == "hello" {
			continue // the test's own
		}
		if x := count(name); x > 0 {
			per[name] = x
			total += x
		}
	}
	var parts []string
	for name, x := range per {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, x))
	}
	slices.Sort(parts)
	t.Logf("commands per node per Acquire + Release: %.1f (%s)", total, strings.Join(parts, ", "))
	// The lean grant (SET, HSETNX, HGET) and release.lua (EVALSHA, GET,
	// EXISTS, DEL, HDEL, and one time in sweepBatch HRANDFIELD, TIME and
	// HDEL for the sweep): 8 to 11, and more when a try falls back to the
	// full path on a loaded machine.
	if total > 12 {
		t.Errorf("%.1f commands per node per Acquire + Release, want at most 12", total)
	}
	// A node that answers a try later than the per-node timeout (a
	// loaded machine) sends it to the full path: allow a few.
	if per["hsetnx"] < 0.9 || per["evalsha"] > 1.1 {
		t.Errorf("hsetnx %.2f, evalsha %.2f per node per operation: want one lean grant and one script (the release)", per["hsetnx"], per["evalsha"])
	}
	for _, full := range []string{"hset", "incr"} { // acquire.lua's (release.lua's uncontended path runs EXISTS)
		if per[full] > 0.1 {
			t.Errorf("%s ran %.2f times per node per operation: the full scripts ran", full, per[full])
		}
	}
}

// TestLeanStaleRecord: a record of the key already on a node's state —
// a lock that expired without a release, or the only trace of a lock key
// evicted behind Redlock's back — sends the grant to the full path, whose
// script judges it (and finds here no eviction: the node keeps voting);
// the record is then the grant's own, and the release removes it.
func TestLeanStaleRecord(t *testing.T) {
	a := shared(t)
	rl := newRedlock(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := newClients(a)
	defer closeClients(clients)
	const state = "\x00redlock:node"
	records := func(key string) []string {
		var got []string
		for _, c := range clients {
			r, _ := c.HGet(ctx, state, key).Result()
			got = append(got, r)
		}
		return got
	}
	for _, tc := range []struct {
		name   string
		expiry time.Duration // of the planted record, from now
	}{
		{"live record, key gone", time.Minute},
		{"expired record", -time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// On every node, so that whichever answer first have it.
			key := fmt.Sprintf("stale:%d", time.Now().UnixNano())
			rec := strconv.FormatInt(time.Now().Add(tc.expiry).UnixMilli(), 10) + " 0123456789abcdef0123456789abcdef"
			for _, c := range clients {
				if err := c.HSet(ctx, state, key, rec).Err(); err != nil {
					t.Fatal(err)
				}
			}
			before := commandStats(t, a)
			lease, err := rl.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			after := commandStats(t, a)
			if after["hset"]-before["hset"] < int64(rl.Quorum()) {
				t.Errorf("HSET ran on %d nodes: the full script did not judge the records on a quorum", after["hset"]-before["hset"])
			}
			got := records(key)
			if own := len(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s == rec || s == "" })); own < rl.Quorum() {
				t.Errorf("records after the grant: %q; want the grant's own on a quorum", got)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			await(t, 5*time.Second, "the records gone after the release", func() bool {
				return !slices.ContainsFunc(records(key), func(s string) bool { return s != "" })
			})
			// The next grant of the key is lean again.
			before = commandStats(t, a)
			lease, err = rl.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			after = commandStats(t, a)
			if after["hset"] != before["hset"] || after["hsetnx"]-before["hsetnx"] < int64(rl.Quorum()) {
				t.Errorf("the next grant was not lean: hset %d → %d, hsetnx %d → %d", before["hset"], after["hset"], before["hsetnx"], after["hsetnx"])
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// commandStats returns the calls of each command, summed over the nodes
// at addrs (INFO commandstats).
// commandsPerOp runs op 5 times to warm up, then 100 times, and returns
// the calls of a command per node per op in those 100, from INFO
// commandstats.
func commandsPerOp(t testing.TB, addrs []string, op func()) func(name string) float64 {
	t.Helper()
	for range 5 {
		op()
	}
	const n = 100
	before := commandStats(t, addrs)
	for range n {
		op()
	}
	after := commandStats(t, addrs)
	return func(name string) float64 { return float64(after[name]-before[name]) / float64(n*len(addrs)) }
}

func commandStats(t testing.TB, addrs []string) map[string]int64 {
	t.Helper()
	s := map[string]int64{}
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
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			v, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				t.Fatalf("INFO commandstats: %q", line)
			}
			s[strings.TrimPrefix(name, "cmdstat_")] += v
		}
	}
	return s
}
