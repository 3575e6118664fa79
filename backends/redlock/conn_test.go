//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// work runs clients goroutines that take and give back keys of their own
// on rl, for d, and returns how many operations ran and failed.
func work(rl *redlock.Redlock, prefix string, clients int, d time.Duration) (ops, failed int, first error) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	stop := time.Now().Add(d)
	for c := range clients {
		wg.Go(func() {
			key := fmt.Sprintf("%s:%d", prefix, c)
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := func() error {
					lease, err := rl.Acquire(ctx, key, locker.WithTTL(5*time.Second))
					if err != nil {
						return err
					}
					return lease.Release(ctx)
				}()
				cancel()
				mu.Lock()
				ops++
				if err != nil {
					failed++
					if first == nil {
						first = err
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ops, failed, first
}

// warm opens every connection rl will keep: its pipelined ones, and the
// hand-off ones, which a first contended Acquire dials.
func warm(t *testing.T, rl *redlock.Redlock, addrs []string) {
	t.Helper()
	if _, failed, err := work(rl, "warm", 4, 100*time.Millisecond); failed > 0 {
		t.Fatalf("%d failures before the test: %v", failed, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	other := newRedlock(t, addrs)
	held, err := other.Acquire(ctx, "warm:contended", locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := rl.Acquire(ctx, "warm:contended")
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	await(t, 10*time.Second, "a hand-off wait", func() bool { return strings.Contains(goroutines(), "redlock.(*handoff).run") })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestShortDeadlineCostsOthersNothing is item 5's other half: a caller
// whose context ends while its request is being sent must not break the
// connection that other callers' requests share.
func TestShortDeadlineCostsOthersNothing(t *testing.T) {
	nodes, addrs := fresh(t, 5, redisOptions{})
	rl := newRedlock(t, addrs)
	warm(t, rl, addrs)
	conns := newCounter(t, nodes)
	before := conns.count(t)
	stop := make(chan struct{})
	var hasty sync.WaitGroup
	var tries atomic.Int64
	for range 2 {
		hasty.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(300))*time.Microsecond)
				if lease, err := rl.TryAcquire(ctx, fmt.Sprintf("hasty:%d", i)); err == nil {
					lease.Release(context.Background())
				}
				cancel()
				tries.Add(1)
			}
		})
	}
	ops, failed, err := work(rl, "patient", 4, 2*time.Second)
	close(stop)
	hasty.Wait()
	t.Logf("%d operations, %d hasty tries alongside", ops, tries.Load())
	if failed > 0 {
		t.Errorf("%d of %d operations failed beside callers with sub-millisecond deadlines; the first: %v", failed, ops, err)
	}
	if opened := conns.count(t) - before; opened > 0 {
		t.Errorf("%d connections were opened again: a caller's deadline broke shared connections", opened)
	}
}

// TestWaitHasItsOwnConnection is item 9: a grant's WAIT blocks the
// connection it is sent on until the replicas acknowledge or it times
// out; the Extend and Release of other leases must not queue behind it.
func TestWaitHasItsOwnConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := forTest(t).Redis(ctx, 2, redisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	master, replica := nodes[0], nodes[1]
	host, port, _ := strings.Cut(master.ServerAddr(), ":")
	if err := direct(t, replica).Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	await(t, 30*time.Second, "replica in sync", func() bool {
		info, err := direct(t, master).Info(ctx, "replication").Result()
		n, _ := infoField(info, "connected_slaves")
		s, _ := infoField(info, "slave0")
		return err == nil && n == "1" && strings.Contains(s, "state=online")
	})
	const waitFor = 2 * time.Second
	rl := newRedlock(t, []string{master.Addr()}, redlock.WithQuarantine(false), redlock.WithWait(1, waitFor), redlock.WithNodeTimeout(waitFor/2))
	lease, err := rl.Acquire(ctx, "held", locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The replica stops acknowledging: the next grant's WAIT blocks.
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Resume() })
	blocked := make(chan error, 1)
	go func() {
		_, err := rl.TryAcquire(ctx, "waiting")
		blocked <- err
	}()
	await(t, 10*time.Second, "a client blocked in WAIT", func() bool {
		list, err := direct(t, master).ClientList(ctx).Result()
		return err == nil && strings.Contains(list, "cmd=wait")
	})
	start := time.Now()
	extendCtx, cancelExtend := context.WithTimeout(ctx, waitFor/4)
	defer cancelExtend()
	err = lease.Extend(extendCtx, 10*time.Second)
	took := time.Since(start)
	if err != nil {
		t.Errorf("Extend while another grant WAITs: %v (after %v)", err, took.Round(time.Millisecond))
	}
	if err := <-blocked; !errors.Is(err, locker.ErrNotAcquired) {
		t.Errorf("the grant whose WAIT timed out = %v, want ErrNotAcquired", err)
	}
}
