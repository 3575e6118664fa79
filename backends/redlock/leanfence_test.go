//go:build go1.25

package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// The lean path with fencing tokens (see lean.go): its grant runs
// the advance script, and its grant's token is written back to a majority
// as the full path's is.

// counterKey is the fencing counter of key under the default prefix.
func counterKey(key string) string { return redlock.DefaultKeyPrefix + "token:" + key }

// floorName names a subtest by the clock floor's setting.
func floorName(floor bool) string {
	if floor {
		return "clock floor"
	}
	return "counter only"
}

// TestLeanFencedPath: with fencing, with or without the clock floor, an
// uncontended Acquire + Release takes the lean path: each node runs the
// lean grant's commands, the advance script among them (without the clock
// floor, a plain INCR), and the release script, and not the acquire script
// (its record's HSET). Tokens increase strictly, and with the floor
// are at least the acquiring client's clock in µs.
func TestLeanFencedPath(t *testing.T) {
	a := shared(t)
	for _, floor := range []bool{true, false} {
		t.Run(floorName(floor), func(t *testing.T) {
			rl := newRedlock(t, a, redlock.WithFencing(true), redlock.WithClockFloor(floor))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := fmt.Sprintf("leanfenced:%d", time.Now().UnixNano())
			var last uint64
			op := func() {
				start := uint64(time.Now().UnixMicro())
				lease, err := rl.Acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				tok, ok := lease.Token()
				if !ok || tok <= last {
					t.Errorf("token %d (%v) after %d", tok, ok, last)
				}
				if floor && tok < start {
					t.Errorf("token %d below the clock %d µs at the Acquire", tok, start)
				}
				last = tok
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			per := commandsPerOp(t, a, op)
			t.Logf("per node per Acquire + Release: hsetnx %.2f, evalsha %.2f, incr %.2f, hset %.2f",
				per("hsetnx"), per("evalsha"), per("incr"), per("hset"))
			// A node that answers a try later than the per-node timeout (a
			// loaded machine) sends it to the full path: allow a few.
			scripts := 1.0 // the release
			if floor {
				scripts++ // the advance script
			}
			if per("hsetnx") < 0.9 || per("evalsha") < scripts-0.2 || per("evalsha") > scripts+0.2 {
				t.Errorf("hsetnx %.2f, evalsha %.2f per node per operation: want one lean grant and %.0f scripts",
					per("hsetnx"), per("evalsha"), scripts)
			}
			if per("incr") < 0.9 || per("incr") > 1.1 {
				t.Errorf("incr %.2f per node per operation: want one", per("incr"))
			}
			if per("hset") > 0.1 { // the acquire script's record
				t.Errorf("hset ran %.2f times per node per operation: the acquire script ran", per("hset"))
			}
		})
	}
}

// tokenLog checks, per key, that each grant's token is above the last
// one's. Grants are logged while their lease is held, so the order of
// the log is the order of the grants.
type tokenLog struct {
	t    *testing.T
	mu   sync.Mutex
	last map[string]uint64
	n    int
}

func (l *tokenLog) add(key string, lease locker.Lease, at time.Time, floor bool) {
	l.t.Helper()
	tok, ok := lease.Token()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]uint64{}
	}
	if !ok || tok <= l.last[key] {
		l.t.Errorf("%s: grant %d has token %d (%v), not above the previous grant's %d", key, l.n, tok, ok, l.last[key])
	}
	if floor && tok < uint64(at.UnixMicro()) {
		l.t.Errorf("%s: token %d below the clock %d µs when the Acquire began", key, tok, at.UnixMicro())
	}
	l.last[key] = tok
	l.n++
}

// TestLeanFencedTokensIncrease: tokens increase strictly across long
// sequences of grants, lean and full, on one key and on many, with the
// clock floor on and off: grants of the lean path; lean tries given back
// because the key was held (their counters advanced, nothing granted),
// then granted on the full path by a hand-off; keys taking the full path
// while hot; lean tries given back for a stale record, then granted on
// the full path; and Redlocks contending for a few keys.
func TestLeanFencedTokensIncrease(t *testing.T) {
	a := shared(t)
	ignore := locktest.Running()
	t.Cleanup(func() { ignore.Leaked(t) })
	for _, floor := range []bool{true, false} {
		t.Run(floorName(floor), func(t *testing.T) {
			opts := []redlock.Option{redlock.WithFencing(true), redlock.WithClockFloor(floor)}
			rls := []*redlock.Redlock{newRedlock(t, a, opts...), newRedlock(t, a, opts...), newRedlock(t, a, opts...)}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			clients := newClients(a)
			defer closeClients(clients)
			log := &tokenLog{t: t}
			prefix := fmt.Sprintf("tokens:%v:%d:", floor, time.Now().UnixNano())
			acquire := func(rl *redlock.Redlock, key string) locker.Lease {
				t.Helper()
				at := time.Now()
				lease, err := rl.Acquire(ctx, key, locker.WithTTL(10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				log.add(key, lease, at, floor)
				return lease
			}
			release := func(lease locker.Lease) {
				t.Helper()
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			before := commandStats(t, a)
			// One key, in turn.
			key := prefix + "one"
			for round := range 20 {
				holder, other := rls[round%3], rls[(round+1)%3]
				release(acquire(holder, key)) // lean (full while hot)
				// Held: the other's lean try is refused and given back (its
				// counters advanced); its Acquire then waits on the full
				// path and is handed the key.
				lease := acquire(holder, key)
				if _, err := other.TryAcquire(ctx, key); err == nil {
					t.Fatal("TryAcquire of a held key succeeded")
				}
				at := time.Now()
				got := make(chan locker.Lease, 1)
				go func() {
					l, err := other.Acquire(ctx, key, locker.WithTTL(10*time.Second))
					if err != nil {
						t.Error(err)
					}
					got <- l
				}()
				await(t, 10*time.Second, "the waiter queued", func() bool {
					for _, c := range clients {
						if n, _ := c.Exists(ctx, redlock.DefaultKeyPrefix+"waiters:"+key).Result(); n > 0 {
							return true
						}
					}
					return false
				})
				release(lease)
				handed := <-got
				if handed == nil {
					t.FailNow()
				}
				log.add(key, handed, at, floor)
				release(handed)
				// A stale record of the key on every node: the lean try
				// meets it, gives back what it set, and the full path
				// grants.
				rec := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10) + " 0123456789abcdef0123456789abcdef"
				for _, c := range clients {
					if err := c.HSet(ctx, redlock.DefaultKeyPrefix+"node", key, rec).Err(); err != nil {
						t.Fatal(err)
					}
				}
				release(acquire(rls[2], key))
			}
			// Many keys: Redlocks contending for a few keys, with tries.
			var wg sync.WaitGroup
			for g := range 4 {
				rl := newRedlock(t, a, opts...)
				wg.Go(func() {
					for range 40 {
						key := prefix + strconv.Itoa(rand.IntN(5))
						at := time.Now()
						var lease locker.Lease
						var err error
						if rand.IntN(4) == 0 {
							lease, err = rl.TryAcquire(ctx, key, locker.WithTTL(10*time.Second))
						} else {
							lease, err = rl.Acquire(ctx, key, locker.WithTTL(10*time.Second))
						}
						if err != nil {
							if !errorsIs(err, locker.ErrNotAcquired) {
								t.Errorf("goroutine %d: %v", g, err)
								return
							}
							continue
						}
						log.add(key, lease, at, floor)
						if err := lease.Release(ctx); err != nil {
							t.Errorf("goroutine %d: %v", g, err)
							return
						}
					}
				})
			}
			wg.Wait()
			after := commandStats(t, a)
			t.Logf("%d grants; per node: %d HSETNX (lean tries), %d HSET (the acquire script's records, full tries; and the stale records planted)",
				log.n, (after["hsetnx"]-before["hsetnx"])/int64(len(a)), (after["hset"]-before["hset"])/int64(len(a)))
			if after["hsetnx"] == before["hsetnx"] || after["hset"] == before["hset"] {
				t.Errorf("the lean path and the full path did not both run: hsetnx %d → %d, hset %d → %d",
					before["hsetnx"], after["hsetnx"], before["hset"], after["hset"])
			}
		})
	}
}

// TestLeanFencedWriteBack: a lean grant whose nodes return different
// tokens writes the highest back until a majority has it before Acquire
// returns, as the full path does: every node's counter is planted
// different (the highest on one node only), and after each lean grant a
// majority of the counters are at least its token.
func TestLeanFencedWriteBack(t *testing.T) {
	a := shared(t)
	clients := newClients(a)
	defer closeClients(clients)
	for _, floor := range []bool{true, false} {
		t.Run(floorName(floor), func(t *testing.T) {
			rl := newRedlock(t, a, redlock.WithFencing(true), redlock.WithClockFloor(floor))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := fmt.Sprintf("writeback:%d", time.Now().UnixNano())
			var last uint64
			for round := range 10 {
				base := last + 1000
				if floor {
					base = max(base, uint64(time.Now().Add(time.Hour).UnixMicro())) // above the floor
				}
				for i, c := range clients {
					if err := c.Set(ctx, counterKey(key), base+100*uint64(i), 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
				before := commandStats(t, a)
				lease, err := rl.Acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				after := commandStats(t, a)
				tok, _ := lease.Token()
				if after["hsetnx"]-before["hsetnx"] < int64(rl.Quorum()) || after["hset"] != before["hset"] {
					t.Errorf("round %d: the grant was not lean: hsetnx %d → %d, hset %d → %d",
						round, before["hsetnx"], after["hsetnx"], before["hset"], after["hset"])
				}
				if tok <= base {
					t.Errorf("round %d: token %d not above the planted counters (from %d)", round, tok, base)
				}
				have := 0
				var counters []string
				for _, c := range clients {
					v, err := c.Get(ctx, counterKey(key)).Uint64()
					if err != nil && err != redis.Nil {
						t.Fatal(err)
					}
					if v >= tok {
						have++
					}
					counters = append(counters, strconv.FormatUint(v, 10))
				}
				if have < rl.Quorum() {
					t.Errorf("round %d: token %d is on %d nodes (counters %v), want a majority (%d)", round, tok, have, counters, rl.Quorum())
				}
				last = tok
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestLeanFencedNoScript: nodes that lost their scripts (SCRIPT FLUSH)
// answer NOSCRIPT to the lean grant's advance script, after its SET ran: the try
// gives back what it set, the full path grants, the key is free after
// the release, and the next grant is lean again.
func TestLeanFencedNoScript(t *testing.T) {
	nodes, addrs := fresh(t, 3, redisOptions{})
	rl := newRedlock(t, addrs, redlock.WithFencing(true))
	other := newRedlock(t, addrs, redlock.WithFencing(true))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grant := func(rl *redlock.Redlock, last uint64) uint64 {
		t.Helper()
		lease, err := rl.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := lease.Token()
		if tok <= last {
			t.Errorf("token %d after %d", tok, last)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	last := grant(rl, 0)
	for _, n := range nodes {
		if err := direct(t, n).ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	last = grant(rl, last)
	last = grant(other, last)
	before := commandStats(t, addrs)
	grant(rl, last)
	after := commandStats(t, addrs)
	if after["hsetnx"]-before["hsetnx"] < int64(rl.Quorum()) || after["hset"] != before["hset"] {
		t.Errorf("the grant after the reload was not lean: hsetnx %d → %d, hset %d → %d",
			before["hsetnx"], after["hsetnx"], before["hset"], after["hset"])
	}
}
