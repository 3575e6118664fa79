package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
)

// TestSessionExpiryLosesLease cuts a holder off from a standalone server
// (through the server's proxy) past its session timeout. The server then
// expires the session, deletes the holder's znode and grants the key to a
// client that reaches it directly. By the time that grant returns, the
// holder's lease must have ended with ErrLost: the holder learns of the
// loss no later than the key is granted again. Once the partition heals,
// the holder's Locker works again, on a new session.
func TestSessionExpiryLosesLease(t *testing.T) {
	t.Parallel()
	node := ensemble(t, 1, true).Nodes[0]
	const session = 2 * time.Second
	params := map[string]string{"session": session.String()}
	a := openClosed(t, []string{node.Addr()}, params)
	b := openClosed(t, []string{node.ServerAddr()}, params)
	const key = "expiry"
	held := mustAcquire(t, a, key, locker.WithTTL(time.Minute))

	type grant struct {
		lease locker.Lease
		err   error
		at    time.Time
	}
	granted := make(chan grant, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lease, err := b.Acquire(ctx, key, locker.WithTTL(time.Minute))
		granted <- grant{lease, err, time.Now()}
	}()
	ended := make(chan time.Time, 1)
	go func() {
		<-held.Done()
		ended <- time.Now()
	}()

	cut := time.Now()
	if err := node.Partition(); err != nil {
		t.Fatal(err)
	}
	g := <-granted
	if g.err != nil {
		t.Fatalf("the other client's Acquire: %v", g.err)
	}
	select {
	case <-held.Done():
	default:
		t.Fatalf("key granted to another client %v after the partition while the cut-off holder's lease was still held", g.at.Sub(cut))
	}
	at := <-ended
	t.Logf("partition at 0: holder's lease ended at %v, key granted again at %v; holder's Err: %v",
		at.Sub(cut).Round(time.Millisecond), g.at.Sub(cut).Round(time.Millisecond), held.Err())
	if !errors.Is(held.Err(), locker.ErrLost) {
		t.Fatalf("cut-off holder's Err = %v, want ErrLost", held.Err())
	}
	if early := at.Sub(cut); early < session/2 {
		t.Fatalf("holder gave its lease up %v after the partition: the session could not have expired before %v", early, session/2)
	}
	tokA, _ := held.Token()
	if tokB, _ := g.lease.Token(); tokB <= tokA {
		t.Fatalf("token of the new grant %d not above the lost lease's %d", tokB, tokA)
	}

	if err := node.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := g.lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := mustAcquire(t, a, key, locker.WithTTL(time.Minute))
	if err := again.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWhileServerPaused closes a Locker whose only server is stopped
// (SIGSTOP): go-zookeeper is then reading a connect reply with a deadline
// of many seconds. Close must still return promptly, end the lease, and
// leave no goroutine behind. (Not parallel: the leak check would see the
// goroutines of other tests.)
func TestCloseWhileServerPaused(t *testing.T) {
	node := ensemble(t, 1, false).Nodes[0]
	before := goleak.IgnoreCurrent()
	l := open(t, []string{node.Addr()}, map[string]string{"session": "1s"})
	lease := mustAcquire(t, l, "paused", locker.WithTTL(time.Minute), locker.WithAutoExtend(true))
	if err := node.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Resume() })
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lease still held 10s after its only server stopped, with a 1s session")
	}
	if !errors.Is(lease.Err(), locker.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", lease.Err())
	}
	// Wait until go-zookeeper has dialled the stopped server again (the
	// kernel accepts for it) and is reading the connect reply that will
	// not come: the state is Connected, without a session.
	waitFor(t, 10*time.Second, "reconnect to the stopped server", func() bool { return l.conn.State() == zk.StateConnected })
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("lease ended with %v; Close took %v", lease.Err(), took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Fatalf("Close took %v with the server stopped", took)
	}
	goleak.VerifyNone(t, before)
}

// TestMemberDown checks that a three-member ensemble keeps granting with
// one member down: first the leader, then the member the client is
// connected to. A lease held all along survives both, since the client
// reconnects within its session.
func TestMemberDown(t *testing.T) {
	t.Parallel()
	z := ensemble(t, 3, false)
	l := openClosed(t, z.Addrs(), nil)
	other := openClosed(t, z.Addrs(), nil)
	held := mustAcquire(t, l, "held", locker.WithTTL(10*time.Minute))

	loop := func(t *testing.T, what string) {
		t.Helper()
		start := time.Now()
		for i := range 20 {
			lc := l
			if i%2 == 1 {
				lc = other
			}
			lease := mustAcquire(t, lc, "loop")
			if err := lease.Release(context.Background()); err != nil {
				t.Fatalf("%s: Release %d: %v", what, i, err)
			}
		}
		t.Logf("%s: 20 grants in %v", what, time.Since(start).Round(time.Millisecond))
		if err := held.Err(); err != nil {
			t.Fatalf("%s: the lease held all along ended: %v", what, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := held.Extend(ctx, 10*time.Minute); err != nil {
			t.Fatalf("%s: Extend of the lease held all along: %v", what, err)
		}
		if lease, err := other.TryAcquire(ctx, "held"); !errors.Is(err, locker.ErrNotAcquired) {
			if lease != nil {
				_ = lease.Release(ctx)
			}
			t.Fatalf("%s: TryAcquire of the held key = %v, want ErrNotAcquired", what, err)
		}
	}
	restart := func(n *compose.Node) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	leader, err := z.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	loop(t, "leader "+leader.Name+" killed")
	restart(leader)

	var conn *compose.Node
	for _, n := range z.Nodes {
		if n.Addr() == l.conn.Server() {
			conn = n
		}
	}
	if conn == nil {
		t.Fatalf("the client's server %s is none of %v", l.conn.Server(), z.Addrs())
	}
	if err := conn.Kill(); err != nil {
		t.Fatal(err)
	}
	loop(t, "client's server "+conn.Name+" killed")
	restart(conn)
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every 10 ms until it holds, failing the test after
// within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(within)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no %s within %v", what, within)
		}
	}
}

// TestStolenLeaseEndsAtOnce deletes a holder's znode behind its back and
// checks that the lease ends by itself, without an Extend or Release to
// find out: through the watch on its own znode.
func TestStolenLeaseEndsAtOnce(t *testing.T) {
	addrs := standalone(t)
	l := openClosed(t, addrs, nil)
	thief := rawConn(t, addrs)
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("watchArmed=%v", hold), func(t *testing.T) {
			key := fmt.Sprintf("stolen-%v-%d", hold, time.Now().UnixNano())
			lease := mustAcquire(t, l, key, locker.WithTTL(time.Minute))
			if hold {
				// Steal once the watch is set: its NodeDeleted ends the lease.
				waitFor(t, 5*time.Second, "watch on the lease's znode", func() bool { return mntr(t, addrs[0], "zk_watch_count") > 0 })
			}
			stolen := time.Now()
			steal(t, thief, DefaultRoot, key)
			select {
			case <-lease.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("stolen lease still held 5s later")
			}
			t.Logf("lease ended %v after the steal: %v", time.Since(stolen).Round(time.Microsecond), lease.Err())
			if !errors.Is(lease.Err(), locker.ErrLost) || !strings.Contains(lease.Err().Error(), "deleted") {
				t.Fatalf("Err of a stolen lease = %v, want ErrLost saying the znode was deleted", lease.Err())
			}
		})
	}
}
