//go:build go1.25

package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// TestHandoffNeverOutlivesTheKey: a lease, whether a round granted it or
// a release handed it over (the waiter learns of it from the key's queue
// nodes and asks nothing more), never ends later than the key lives on a
// majority of the nodes. Four Redlocks take turns on one hot key; after
// each grant the test reads the key's value and remaining life (PTTL) on
// every node and wants a majority on which the key holds one value and
// lives at least until the lease's validity plus the drift allowance (2
// ms with no drift: the lease's end before it is shortened for drift).
// Reads are lenient by what they cannot know: the time the node ran PTTL
// is taken as when its reply came, and 1 ms for the rounding of Redis
// expiries. Most grants must be hand-offs, or the test proves nothing.
func TestHandoffNeverOutlivesTheKey(t *testing.T) {
	startsServers(t)
	const (
		clients = 4
		turns   = 25
		ttl     = time.Second
	)
	key := fmt.Sprintf("validity:%d", time.Now().UnixNano())
	raw := newClients(addrs)
	t.Cleanup(func() { closeClients(raw) })
	quorum := len(addrs)/2 + 1

	var mu sync.Mutex
	handed, total := 0, 0
	check := func(lease locker.Lease) {
		end := lease.ValidUntil().Add(2 * time.Millisecond)
		lives := map[string]int{} // value -> nodes on which it lives past end
		for _, c := range raw {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var get *redis.StringCmd
			var pttl *redis.DurationCmd
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				get, pttl = p.Get(ctx, key), p.PTTL(ctx, key)
				return nil
			})
			read := time.Now()
			cancel()
			if err != nil {
				continue // the key is not there (redis.Nil): no life
			}
			if read.Add(pttl.Val() + time.Millisecond).Before(end) {
				continue
			}
			lives[get.Val()]++
		}
		mu.Lock()
		defer mu.Unlock()
		total++
		for v, n := range lives {
			if n >= quorum {
				if strings.HasPrefix(v, "handed:") {
					handed++
				}
				return
			}
		}
		t.Errorf("lease of %q valid until %s: the key lives that long on fewer than %d nodes (%v)", key, lease.ValidUntil().Format(time.StampMicro), quorum, lives)
	}

	var wg sync.WaitGroup
	for range clients {
		rl := newRedlock(t, addrs, redlock.WithDrift(0))
		wg.Go(func() {
			for range turns {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				lease, err := rl.Acquire(ctx, key, locker.WithTTL(ttl))
				if err != nil {
					cancel()
					t.Error(err)
					return
				}
				check(lease)
				if err := lease.Release(ctx); err != nil {
					t.Error(err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	t.Logf("%d of %d grants were hand-offs", handed, total)
	if handed < total/2 {
		t.Errorf("only %d of %d grants were hand-offs: the hand-off path was not exercised", handed, total)
	}
}
