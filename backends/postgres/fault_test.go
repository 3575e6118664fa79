package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	postgreskind "github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// TestAdvisorySessionKilled: when the session holding an advisory lock is
// killed — terminated by an operator, or its server crashes — the lease
// ends with ErrLost at once (the watcher reads the session's end), and the
// key is free for the next client once the server serves again.
func TestAdvisorySessionKilled(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 33 s on a 2-core machine loaded about 10×
	for _, tc := range []struct {
		name string
		kill func(t *testing.T, n *compose.Node, key string)
	}{
		{"terminated", func(t *testing.T, n *compose.Node, key string) { terminate(t, admin(t, n.Addr()), key) }},
		{"server crashed", func(t *testing.T, n *compose.Node, _ string) {
			if err := n.Kill(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := server(t, compose.Spec{Durability: compose.DurabilityFast}, postgreskind.Options{})
			before := goleak.IgnoreCurrent()
			a, b := open(t, n.Addr(), Advisory, nil), open(t, n.Addr(), Advisory, nil)
			key := "killed"
			lease := locktest.MustAcquire(t, a, key, locker.WithTTL(time.Hour))
			start := time.Now()
			tc.kill(t, n, key)
			err := locktest.WaitDone(t, lease, 10*time.Second)
			t.Logf("lease ended %v after the kill: %v", time.Since(start).Round(time.Millisecond), err)
			if !errors.Is(err, locker.ErrLost) || !errors.Is(err, locker.ErrUnavailable) {
				t.Fatalf("Err = %v, want ErrLost naming the server", err)
			}
			if err := n.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			next, err := b.TryAcquire(context.Background(), key)
			if err != nil {
				t.Fatalf("TryAcquire after the holder's session died: %v", err)
			}
			if err := next.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			a.Close()
			b.Close()
			// The restarted server's process is waited for by its reaper.
			goleak.VerifyNone(t, before, goleak.IgnoreAnyFunction("github.com/lockbench/lockbench/remote.reap"))
		})
	}
}

// TestLeaseExpiredLargerToken: a lease row that expired (its holder
// stopped extending it) is granted to the next client with a larger token,
// never before the first holder's ValidUntil, and the server refuses the
// first holder's extension and release from then on.
func TestLeaseExpiredLargerToken(t *testing.T) {
	addr := shared.Get(t)
	a, b := openClosed(t, addr, Lease), openClosed(t, addr, Lease)
	c := admin(t, addr)
	key := fmt.Sprintf("expired:%d", time.Now().UnixNano())
	first := locktest.MustAcquire(t, a, key, locker.WithTTL(300*time.Millisecond))
	// The first holder's row, as the server has it.
	stale := &row{l: a, key: key}
	if err := c.QueryRow(context.Background(), "SELECT holder FROM "+DefaultTable+" WHERE key = $1", key).Scan(&stale.holder); err != nil {
		t.Fatal(err)
	}
	second := locktest.MustAcquire(t, b, key, locker.WithTTL(time.Minute), locker.WithRetry(locker.LinearBackoff(5*time.Millisecond)))
	if granted := time.Now(); granted.Before(first.ValidUntil()) {
		t.Fatalf("granted again %v before the first lease's ValidUntil", first.ValidUntil().Sub(granted))
	}
	t1, _ := first.Token()
	t2, _ := second.Token()
	if t2 <= t1 {
		t.Fatalf("token %d of the grant after expiry not above the expired lease's %d", t2, t1)
	}
	ctx := context.Background()
	if _, err := stale.Extend(ctx, time.Minute); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("the server extended an expired holder's row: %v", err)
	}
	if err := stale.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("the server released an expired holder's row: %v", err)
	}
	mustHold(t, a, key)
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// mustHold checks that l cannot take key.
func mustHold(t *testing.T, l *Locker, key string) {
	t.Helper()
	if lease, err := l.TryAcquire(context.Background(), key); !errors.Is(err, locker.ErrNotAcquired) {
		if lease != nil {
			lease.Release(context.Background())
		}
		t.Fatalf("TryAcquire(%q) = %v, want ErrNotAcquired", key, err)
	}
}

// TestServerRestart measures what a restart of the server does to a held
// lock, while another client waits for it:
//
//   - advisory: every advisory lock goes with the sessions. The holder's
//     lease ends with ErrLost when its session dies, and the waiter is
//     granted the key once the server is back — after the holder knew
//     (its client reads its session's end at once; locktest.CutOff checks
//     the order).
//   - lease, restarted with its data: the row is committed, so it
//     survives: the holder extends its lease after the restart, the key
//     stays taken, and the next grant's token is larger.
//   - lease, restarted empty (the disk lost): the row is gone, so the key
//     is granted again while the holder's lease is valid, with a token
//     that went back — what a server that forgets its writes does to any
//     lock.
func TestServerRestart(t *testing.T) {
	composetest.StartsServersWithin(t, 4*time.Minute) // 74 s on a 2-core machine loaded about 10×
	t.Run("advisory", func(t *testing.T) {
		n := server(t, compose.Spec{}, postgreskind.Options{})
		a, b := openClosed(t, n.Addr(), Advisory), openClosed(t, n.Addr(), Advisory)
		held := locktest.MustAcquire(t, a, "restart", locker.WithTTL(time.Hour))
		tk := locktest.CutOff(t, held, b, time.Minute, func() error {
			return n.Restart(context.Background(), true)
		})
		if err := tk.Lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("lease/keepData=%v", keep), func(t *testing.T) {
			n := server(t, compose.Spec{}, postgreskind.Options{})
			a, b := openClosed(t, n.Addr(), Lease), openClosed(t, n.Addr(), Lease)
			ctx := context.Background()
			held := locktest.MustAcquire(t, a, "restart", locker.WithTTL(time.Minute))
			tok, _ := held.Token()
			start := time.Now()
			if err := n.Restart(ctx, keep); err != nil {
				t.Fatal(err)
			}
			t.Logf("server back %v after the restart began", time.Since(start).Round(time.Millisecond))
			next, err := b.TryAcquire(ctx, "restart", locker.WithTTL(time.Minute))
			if !keep {
				if err != nil {
					t.Fatalf("TryAcquire after a restart without data: %v, want the key granted again", err)
				}
				nextTok, _ := next.Token()
				t.Logf("restarted empty: the key was granted again while held (token %d after %d); the holder learns it at its next extension", nextTok, tok)
				if nextTok > tok {
					t.Fatalf("token %d after the row was lost, want one that went back (≤ %d)", nextTok, tok)
				}
				if err := held.Extend(ctx, time.Minute); !errors.Is(err, locker.ErrNotHeld) {
					t.Fatalf("Extend of the forgotten lease = %v, want ErrNotHeld", err)
				}
				return
			}
			if !errors.Is(err, locker.ErrNotAcquired) {
				t.Fatalf("TryAcquire after a restart with data = %v, want ErrNotAcquired", err)
			}
			if err := held.Extend(ctx, time.Minute); err != nil {
				t.Fatalf("Extend after a restart with data: %v", err)
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			next = locktest.MustAcquire(t, b, "restart", locker.WithTTL(time.Minute))
			if nextTok, _ := next.Token(); nextTok <= tok {
				t.Fatalf("token %d after the restart not above %d", nextTok, tok)
			}
			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFastProfileForgetsGrants: under the fast profile a commit is
// acknowledged before its WAL leaves the server's memory, so a crash
// forgets the grants of the server's last moments (here the WAL writer is
// slowed to 10 s so that the grant is certainly among them), and the key is
// granted twice; under the durable profile the grant survives.
func TestFastProfileForgetsGrants(t *testing.T) {
	for _, d := range []compose.Durability{compose.DurabilityDurable, compose.DurabilityFast} {
		fast := d == compose.DurabilityFast
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			n := server(t, compose.Spec{Durability: d}, postgreskind.Options{Config: [][2]string{{"wal_writer_delay", "10s"}}})
			a, b := openClosed(t, n.Addr(), Lease), openClosed(t, n.Addr(), Lease)
			ctx := context.Background()
			// The table, so that the grant below is the only write.
			warm := locktest.MustAcquire(t, a, "warm", locker.WithTTL(time.Minute))
			if err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := admin(t, n.ServerAddr()).Exec(ctx, "CHECKPOINT"); err != nil {
				t.Fatal(err)
			}
			held := locktest.MustAcquire(t, a, "crash", locker.WithTTL(time.Minute))
			if err := n.Restart(ctx, true); err != nil {
				t.Fatal(err)
			}
			next, err := b.TryAcquire(ctx, "crash", locker.WithTTL(time.Minute))
			if !fast {
				if !errors.Is(err, locker.ErrNotAcquired) {
					t.Fatalf("durable: TryAcquire after a crash = %v, want ErrNotAcquired", err)
				}
				if err := held.Release(ctx); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatalf("fast: TryAcquire after a crash = %v; want the forgotten key granted again", err)
			}
			t1, _ := held.Token()
			t2, _ := next.Token()
			t.Logf("fast profile: the crash forgot the grant; granted again with token %d (the lost grant had %d)", t2, t1)
			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
