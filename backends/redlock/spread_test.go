//go:build go1.25

package redlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
)

// TestSpreadJudgesARecord: after a hand-off, the waiter sets the key on
// the nodes other than its queue nodes (spread), with the acquire script
// told to take the key. On one of them the key is gone while a record of
// another value says it should be there, as after an eviction: the script
// must judge that record there, as for any grant. With no eviction since
// the node's admission, the node holds the handed value and a record
// naming it; with evictions (the marker's count made to differ from the
// node's), the node leaves the quorum (its marker goes) and holds no key.
// With a marker whose max TTL is below the client's instead, the script
// must raise it there, and the node holds the handed value. Where another
// value holds the key, the spread takes it: the node holds the handed value.
func TestSpreadJudgesARecord(t *testing.T) {
	if *quorumFirst {
		t.Skip("WithQuorumFirst spreads no hand-off")
	}
	for _, tc := range []struct {
		name    string
		record  bool // a record of another value where the key is gone
		evicted bool // the marker's eviction count differs from the node's
		low     bool // the marker's max TTL is 1 ms
		stray   bool // another value holds the key there
	}{
		{name: "evicted=false", record: true},
		{name: "evicted=true", record: true, evicted: true},
		{name: "max TTL below the client's", low: true},
		{name: "another value there", stray: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, a := fresh(t, 5, redisOptions{})
			h, w := newRedlock(t, a), newRedlock(t, a)
			const key = "judged"
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			queue := queueNodes(nodes, key)
			var other *server
			for _, n := range nodes {
				if !slices.Contains(queue, n) {
					other = n
					break
				}
			}
			x := direct(t, other)
			state, marker := redlock.DefaultKeyPrefix+"node", redlock.DefaultKeyPrefix
			var maxTTL int64
			lease, handed := handedLease(t, h, w, nodes, key, 5*time.Second, func() {
				m, err := x.HGet(ctx, state, marker).Result()
				f := strings.Fields(m)
				if err != nil || len(f) != 3 {
					t.Fatalf("%s: marker %q (%v)", other.Name, m, err)
				}
				maxTTL, _ = strconv.ParseInt(f[1], 10, 64)
				if tc.record {
					// The key gone there, its record naming another
					// value for a minute more: the release leaves that
					// record.
					expiry := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
					if err := x.Del(ctx, key).Err(); err != nil {
						t.Fatal(err)
					}
					if err := x.HSet(ctx, state, key, expiry+" other").Err(); err != nil {
						t.Fatal(err)
					}
				}
				if tc.stray {
					// As a try that fails would leave it, or a release
					// still on its way: the release does not free it.
					if err := x.Set(ctx, key, "stray", time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
				}
				switch {
				case tc.evicted:
					f[2] = "999999"
				case tc.low:
					f[1] = "1"
				default:
					return
				}
				if err := x.HSet(ctx, state, marker, strings.Join(f, " ")).Err(); err != nil {
					t.Fatal(err)
				}
			})
			// The spread is sent, not waited for: await the state the
			// node's judgement leaves, and name what it left instead.
			var v, rec, m string
			judged := func() bool {
				v, _ = x.Get(ctx, key).Result()
				rec, _ = x.HGet(ctx, state, key).Result()
				m, _ = x.HGet(ctx, state, marker).Result()
				switch {
				case tc.evicted:
					return v == "" && m == ""
				case v != handed || !strings.HasSuffix(rec, " "+handed):
					return false
				case tc.low:
					f := strings.Fields(m)
					return len(f) == 3 && f[1] == strconv.FormatInt(maxTTL, 10)
				}
				return true
			}
			switch {
			case poll(10*time.Second, judged):
			case tc.evicted:
				t.Errorf("%s, which evicted keys, holds %q with marker %q: want no key and no marker (quarantine)", other.Name, v, m)
			case v != handed || !strings.HasSuffix(rec, " "+handed):
				t.Errorf("%s holds %q with record %q: want the handed value %q and its record", other.Name, v, rec, handed)
			default:
				t.Errorf("%s: marker %q after the take, want its max TTL raised back to %d", other.Name, m, maxTTL)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
