package redlockbackend_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
)

// closeBound is the longest Close may take whatever the nodes do: the
// release of what it holds (releaseTimeout, 1 s, all at once), the last
// writes (1 s) and dials in progress (the client's DialTimeout, 5 s by
// default), with room for a loaded machine.
const closeBound = 10 * time.Second

// TestCloseWithServersGone (issue 19, §3): Close must end every goroutine
// the library started within a bound, even when its connections stay open
// while the servers behind them are gone (SIGSTOP: the kernel keeps the
// TCP connections; a proxy that blackholes them; every server restarted
// behind its proxy, as in the nemesis test where Close hung), with leases
// held, an Acquire waiting for a hand-off, and operations in flight.
func TestCloseWithServersGone(t *testing.T) {
	for _, fault := range []string{"pause", "partition", "restart"} {
		t.Run(fault, func(t *testing.T) {
			nodes, addrs := fresh(t, 5, compose.Spec{Proxied: true})
			ignore := goleak.IgnoreCurrent()
			other := newRedlock(t, addrs)
			rl := newRedlock(t, addrs)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var leases []locker.Lease
			for i := range 3 {
				lease, err := rl.Acquire(ctx, fmt.Sprintf("held:%d", i), locker.WithTTL(30*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				leases = append(leases, lease)
			}
			held, err := other.Acquire(ctx, "contended", locker.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			wg.Go(func() { // waits for a hand-off
				_, err := rl.Acquire(context.Background(), "contended")
				errs <- err
			})
			await(t, 10*time.Second, "the hand-off wait", func() bool { return hasGoroutine("redlock.(*handoff).run") })
			for _, n := range nodes {
				switch fault {
				case "pause":
					if err := n.Pause(); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { n.Resume() })
				case "partition":
					if err := n.Partition(); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { n.Heal() })
				case "restart": // behind the proxy, which keeps the clients' connections
					if err := n.Restart(ctx, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Operations in flight on the dead connections, without a
			// deadline of their own.
			wg.Go(func() { errs <- leases[0].Release(context.Background()) })
			wg.Go(func() { errs <- leases[1].Extend(context.Background(), 30*time.Second) })
			wg.Go(func() {
				_, err := rl.Acquire(context.Background(), "new")
				errs <- err
			})
			start := time.Now()
			done := make(chan struct{})
			go func() {
				rl.Close()
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(closeBound):
				t.Fatalf("Close has not returned after %v; goroutines:\n%s", closeBound, goroutines())
			}
			t.Logf("Close returned after %v", time.Since(start).Round(time.Millisecond))
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil && !errors.Is(err, locker.ErrClosed) && !errors.Is(err, locker.ErrUnavailable) && !errors.Is(err, locker.ErrNotAcquired) && !errors.Is(err, locker.ErrNotHeld) {
					t.Errorf("an operation cut by Close: %v", err)
				}
			}
			if err := leases[2].Err(); !errors.Is(err, locker.ErrClosed) {
				t.Errorf("a lease held at Close: Err = %v, want ErrLost wrapping ErrClosed", err)
			}
			other.Close()
			_ = held
			goleak.VerifyNone(t, ignore,
				goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/maintnotifications.(*CircuitBreakerManager).cleanupLoop"),
				goleak.IgnoreAnyFunction("github.com/lockbench/lockbench/remote.reap"), // the restarted servers' reapers
				// The proxies' own goroutines for the connections Close
				// closed: toxiproxy tears a link down when it next reads
				// or writes, which on a loaded machine may come after the
				// check. They are the proxy's, not the library's; the
				// compose environment stops them with the proxies.
				goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
				goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
				goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
		})
	}
}
