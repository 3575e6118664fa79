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

// TestTakeJudgesARecord: after a hand-off, the waiter sets the key on the
// nodes other than its queue nodes with plain commands (take). On one of
// them the key is gone while a record of another value says it should be
// there, as after an eviction: the acquire script must judge that record
// there, as it would for any grant. With no eviction since the node's
// admission, the node holds the handed value and a record naming it; with
// evictions (the marker's count made to differ from the node's), the
// node leaves the quorum (its marker goes) and holds no key.
func TestTakeJudgesARecord(t *testing.T) {
	if *quorumFirst {
		t.Skip("WithQuorumFirst spreads no hand-off")
	}
	for _, evicted := range []bool{false, true} {
		t.Run("evicted="+strconv.FormatBool(evicted), func(t *testing.T) {
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
			lease, _ := handedLease(t, h, w, nodes, key, 5*time.Second, func() {
				// The key gone there, its record naming another value
				// for a minute more: the release leaves that record.
				expiry := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
				if err := x.Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
				if err := x.HSet(ctx, state, key, expiry+" other").Err(); err != nil {
					t.Fatal(err)
				}
				if !evicted {
					return
				}
				m, err := x.HGet(ctx, state, marker).Result()
				f := strings.Fields(m)
				if err != nil || len(f) != 3 {
					t.Fatalf("%s: marker %q (%v)", other.Name, m, err)
				}
				if err := x.HSet(ctx, state, marker, f[0]+" "+f[1]+" 999999").Err(); err != nil {
					t.Fatal(err)
				}
			})
			handed, _ := direct(t, queue[0]).Get(ctx, key).Result()
			v, _ := x.Get(ctx, key).Result()
			rec, _ := x.HGet(ctx, state, key).Result()
			m, _ := x.HGet(ctx, state, marker).Result()
			if evicted {
				if v != "" || m != "" {
					t.Errorf("%s, which evicted keys, holds %q with marker %q: want no key and no marker (quarantine)", other.Name, v, m)
				}
			} else if v != handed || !strings.HasSuffix(rec, " "+handed) {
				t.Errorf("%s holds %q with record %q: want the handed value %q and its record", other.Name, v, rec, handed)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
