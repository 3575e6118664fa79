package sentinel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	sentinelkind "github.com/lockbench/lockbench/kinds/sentinel"
	"github.com/lockbench/lockbench/locker"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// replicated waits until n replicas of the master at addr have every write
// it received, and fails the test if they do not within a second.
func replicated(t *testing.T, addr string, n int) {
	t.Helper()
	got, err := direct(t, addr).Wait(ctxFor(t, 5*time.Second), n, time.Second).Result()
	if err != nil || got < int64(n) {
		t.Fatalf("WAIT %d on %s = %d, %v", n, addr, got, err)
	}
}

// exists reports whether key is set on the Redis node at addr.
func exists(t *testing.T, addr, key string) bool {
	t.Helper()
	n, err := direct(t, addr).Exists(ctxFor(t, 5*time.Second), key).Result()
	if err != nil {
		t.Fatalf("EXISTS %s on %s: %v", key, addr, err)
	}
	return n == 1
}

// TestFailoverFollowsMaster: SENTINEL FAILOVER while a lease is held. The
// demoted master stays a writable master for seconds after the sentinels
// switch, so a client that kept its connections would go on granting
// locks there; the Locker must instead take new grants on the new master.
// The held lease was replicated before the failover, so the new master
// still holds its key for it: it can be extended and released, and nobody
// else gets it.
func TestFailoverFollowsMaster(t *testing.T) {
	s := startSet(t, compose.Spec{}, sentinelkind.Options{})
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // runs after the lockers' Close
	a, b := openT(t, s, nil), openT(t, s, nil)
	old := s.Master.ServerAddr()

	lease, err := a.Acquire(ctxFor(t, 10*time.Second), "held", locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := lease.Token()
	replicated(t, old, 1)

	start := time.Now()
	now, err := s.Failover(ctxFor(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SENTINEL FAILOVER %s -> %s took %v", old, now, time.Since(start).Round(time.Millisecond))

	other, err := a.Acquire(ctxFor(t, 10*time.Second), "other", locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("Acquire after the failover: %v", err)
	}
	t.Logf("first grant after the failover %v after it", time.Since(start).Round(time.Millisecond))
	if !exists(t, now, "other") {
		t.Fatalf("the grant after the failover is not on the new master %s", now)
	}
	if exists(t, old, "other") {
		t.Fatalf("the grant after the failover went to the demoted master %s", old)
	}
	if tok2, _ := other.Token(); tok2 == 0 {
		t.Fatalf("no fencing token after the failover: %d", tok2)
	}

	// The replicated lease survived: its key is on the new master, still ours.
	if !exists(t, now, "held") {
		t.Fatalf("the replicated lock is missing on the new master %s", now)
	}
	if lease.Err() != nil {
		t.Fatalf("the held lease ended: %v", lease.Err())
	}
	if _, err := b.TryAcquire(ctxFor(t, 10*time.Second), "held", locker.WithTTL(time.Minute)); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("another client's TryAcquire of the held key after the failover = %v, want ErrNotAcquired", err)
	}
	if err := lease.Extend(ctxFor(t, 10*time.Second), time.Minute); err != nil {
		t.Fatalf("Extend of the replicated lease on the new master: %v", err)
	}
	t.Logf("lease held across the failover (token %d) extended and still exclusive on the new master", tok)
	for _, l := range []locker.Lease{lease, other} {
		if err := l.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("Release %q: %v", l.Key(), err)
		}
	}
	if exists(t, now, "held") {
		t.Fatal("Release left the key on the new master")
	}
}

// TestLostWriteFailover is the Sentinel debate in three acts. Replication
// to the replica runs through a proxy, which the test cuts so that a lock
// written to the master is not replicated; then the master dies and the
// sentinels promote the replica.
//
//   - Without WAIT the lock is lost: a second client is granted the key
//     while the first lease is still valid (the double grant), and its
//     fencing token is not above the first one (the counter's increment
//     was lost with the lock).
//   - With wait=1 the first acquisition fails instead (WAIT times out and
//     the key is released), so this lost write cannot happen.
//   - WAIT is not synchronous replication: with two replicas and wait=1,
//     one acknowledgement suffices; if that replica dies with the master,
//     Sentinel promotes the one that never saw the lock, and the key is
//     granted twice again.
func TestLostWriteFailover(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 21 s on a 2-core machine loaded about 10×
	t.Run("wait=0", func(t *testing.T) {
		s := startSet(t, compose.Spec{}, sentinelkind.Options{ProxiedReplication: true})
		a, b := openT(t, s, nil), openT(t, s, nil)
		first := acquireUnreplicated(t, s, a, nil)
		failoverByCrash(t, s)
		second, err := b.Acquire(ctxFor(t, 30*time.Second), "lock", locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatalf("second client after the failover: %v", err)
		}
		doubleGrant(t, first, second)
	})

	t.Run("wait=1", func(t *testing.T) {
		s := startSet(t, compose.Spec{}, sentinelkind.Options{ProxiedReplication: true})
		a := openT(t, s, map[string]string{"wait": "1", "waittimeout": "100ms"})
		warm(t, a)
		// The warm-up's release must reach the replica before the cut, or
		// the promoted replica holds the warm-up's lock until its TTL.
		replicated(t, s.Master.ServerAddr(), 1)
		if err := s.ReplicationLinks[0].Partition(); err != nil {
			t.Fatal(err)
		}
		// Redis answers WAIT up to one cron tick (100 ms) after its timeout;
		// the Locker's node timeout allows for that, so the refusal is
		// WAIT's own rather than a timeout.
		_, err := a.TryAcquire(ctxFor(t, 10*time.Second), "lock", locker.WithTTL(time.Minute))
		if !errors.Is(err, locker.ErrNotAcquired) || !strings.Contains(err.Error(), "WAIT: 0 of 1 replicas acknowledged") {
			t.Fatalf("TryAcquire with replication held back = %v, want ErrNotAcquired naming WAIT", err)
		}
		t.Logf("with wait=1 and replication held back: %v", err)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if _, err := a.Acquire(ctx, "lock", locker.WithTTL(time.Minute)); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, locker.ErrNotAcquired) {
			t.Fatalf("Acquire with replication held back = %v, want DeadlineExceeded after ErrNotAcquired", err)
		}
		// The refused grant is released, though the release may queue on
		// the master behind a WAIT that has not returned yet.
		gone := time.Now().Add(2 * time.Second)
		for exists(t, s.Master.ServerAddr(), "lock") {
			if time.Now().After(gone) {
				t.Fatal("a grant that WAIT refused was left on the master")
			}
			<-time.After(20 * time.Millisecond) // polling the server, not synchronising
		}
		// Nothing was granted, so the failover has nothing to lose.
		failoverByCrash(t, s)
		b := openT(t, s, nil) // the new master has no replica left to WAIT for
		second, err := b.Acquire(ctxFor(t, 30*time.Second), "lock", locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatalf("Acquire on the new master: %v", err)
		}
		if err := second.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("wait=1,replicas=2", func(t *testing.T) {
		s := startSet(t, compose.Spec{Nodes: 3}, sentinelkind.Options{ProxiedReplication: true})
		params := map[string]string{"wait": "1", "waittimeout": "100ms"}
		a, b := openT(t, s, params), openT(t, s, nil)
		// Replica 1 is held back; replica 0 acknowledges, so WAIT 1 succeeds.
		first := acquireUnreplicated(t, s, a, []int{1})
		if !exists(t, s.Replicas[0].ServerAddr(), "lock") {
			t.Fatal("WAIT 1 succeeded but the lock is not on the healthy replica")
		}
		// The acknowledging replica dies; once the sentinels see it down,
		// the master dies too, and only the replica that lags is left.
		if err := s.Replicas[0].Kill(); err != nil {
			t.Fatal(err)
		}
		replicaDown(t, s, s.Replicas[0].ServerAddr())
		if now := failoverByCrash(t, s); now != s.Replicas[1].ServerAddr() {
			t.Fatalf("promoted %s, want the lagging replica %s", now, s.Replicas[1].ServerAddr())
		}
		second, err := b.Acquire(ctxFor(t, 30*time.Second), "lock", locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatalf("second client after the failover: %v", err)
		}
		doubleGrant(t, first, second)
		t.Log("WAIT bought nothing here: the replica that acknowledged died, and Sentinel promoted one that had not")
	})
}

// warm takes and gives back a key, so that l's connections are up and the
// fencing counter exists before a fault.
func warm(t *testing.T, l locker.Locker) {
	t.Helper()
	for _, key := range []string{"warm", "lock"} {
		lease, err := l.Acquire(ctxFor(t, 10*time.Second), key, locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatalf("warm-up Acquire %q: %v", key, err)
		}
		if err := lease.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// acquireUnreplicated has l take "lock" while the replication links named
// by held (all of them when nil) are cut, and checks that the replicas
// behind them did not get it.
func acquireUnreplicated(t *testing.T, s *sentinelkind.Set, l locker.Locker, held []int) locker.Lease {
	t.Helper()
	warm(t, l)
	replicated(t, s.Master.ServerAddr(), len(s.Replicas))
	if held == nil {
		for i := range s.Replicas {
			held = append(held, i)
		}
	}
	for _, i := range held {
		if err := s.ReplicationLinks[i].Partition(); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := l.Acquire(ctxFor(t, 10*time.Second), "lock", locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("Acquire with replication held back: %v", err)
	}
	for _, i := range held {
		if exists(t, s.Replicas[i].ServerAddr(), "lock") {
			t.Fatalf("the lock reached replica %d behind a partitioned link", i)
		}
	}
	return lease
}

// failoverByCrash kills the master and waits for the sentinels to promote
// a replica, whose address it returns.
func failoverByCrash(t *testing.T, s *sentinelkind.Set) string {
	t.Helper()
	if err := s.Master.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	now, err := s.AwaitNewMaster(ctxFor(t, time.Minute), s.Master.ServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("master killed; %s promoted after %v", now, time.Since(start).Round(time.Millisecond))
	return now
}

// replicaDown waits until every sentinel reports the replica at addr down.
func replicaDown(t *testing.T, s *sentinelkind.Set, addr string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for _, sn := range s.Sentinels {
		c := goredis.NewSentinelClient(&goredis.Options{Addr: sn.ServerAddr(), MaxRetries: -1})
		for {
			reps, err := c.Replicas(ctx, s.MasterName).Result()
			down := false
			for _, r := range reps {
				down = down || (r["name"] == addr && strings.Contains(r["flags"], "s_down"))
			}
			if down {
				break
			}
			select {
			case <-ctx.Done():
				c.Close()
				t.Fatalf("%s does not see replica %s down: %v (last: %v)", sn.Name, addr, ctx.Err(), err)
			case <-time.After(50 * time.Millisecond): // polling the sentinel, not synchronising
			}
		}
		c.Close()
	}
}

// doubleGrant asserts the violation: second was granted while first is
// still valid, and second's token does not order it after first.
func doubleGrant(t *testing.T, first, second locker.Lease) {
	t.Helper()
	if first.Err() != nil || !time.Now().Before(first.ValidUntil()) {
		t.Fatalf("the first lease is no longer valid (Err %v, valid until %v): no double grant to show", first.Err(), first.ValidUntil())
	}
	t1, _ := first.Token()
	t2, _ := second.Token()
	t.Logf("DOUBLE GRANT: %q granted again while the first lease is valid for %v more; tokens %d then %d",
		first.Key(), time.Until(first.ValidUntil()).Round(time.Millisecond), t1, t2)
	if t2 > t1 {
		t.Fatalf("second token %d above the first %d: the failover should have lost the counter's increment", t2, t1)
	}
	// The first holder learns of it only when it next talks to Redis.
	if err := first.Extend(ctxFor(t, 10*time.Second), time.Minute); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Extend of the lost lease = %v, want ErrNotHeld", err)
	}
	if !errors.Is(first.Err(), locker.ErrLost) {
		t.Fatalf("the lost lease's Err = %v, want ErrLost", first.Err())
	}
	if err := second.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}
