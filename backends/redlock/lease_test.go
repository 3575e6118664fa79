//go:build go1.25

package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
)

// TestFencingCountersExpire is item 11: with the clock floor, a key's
// fencing counter may expire (the floor keeps tokens increasing without
// it), so that every lock name does not leave a key on every node
// forever; with plain counters it must not.
func TestFencingCountersExpire(t *testing.T) {
	nodes, addrs := fresh(t, 5, redisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, floor := range []bool{true, false} {
		rl := newRedlock(t, addrs, redlock.WithFencing(true), redlock.WithClockFloor(floor))
		key := map[bool]string{true: "floor", false: "counter"}[floor]
		var last uint64
		for i := range 3 {
			if i == 2 {
				// What expiry does: the counters are gone.
				for _, n := range nodes {
					keys, err := direct(t, n).Keys(ctx, "*"+key+"*").Result()
					if err != nil {
						t.Fatal(err)
					}
					for _, k := range keys {
						if k == key {
							continue
						}
						ttl, err := direct(t, n).PTTL(ctx, k).Result()
						if err != nil {
							t.Fatal(err)
						}
						t.Logf("%s: %q expires in %v", n.Name, k, ttl)
						if floor && ttl <= 0 {
							t.Errorf("clock floor: counter %q on %s never expires", k, n.Name)
						}
						if !floor && ttl > 0 {
							t.Errorf("plain counters: counter %q on %s expires in %v", k, n.Name, ttl)
						}
						if floor {
							direct(t, n).Del(ctx, k)
						}
					}
				}
			}
			lease, err := rl.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			tok, _ := lease.Token()
			if tok <= last {
				t.Errorf("%s: token %d after %d", key, tok, last)
			}
			last = tok
			lease.Release(ctx)
		}
	}
}
