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
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
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
	composetest.StartsServersWithin(t, 2*time.Minute) // 20 s on a 2-core machine loaded about 10×
	node := ensemble(t, 1, true).Nodes[0]
	const session = 2 * time.Second
	params := map[string]string{"session": session.String()}
	a := openClosed(t, []string{node.Addr()}, params)
	b := openClosed(t, []string{node.ServerAddr()}, params)
	const key = "expiry"
	held := locktest.MustAcquire(t, a, key, locker.WithTTL(time.Minute))

	tk := locktest.CutOff(t, held, b, 30*time.Second, node.Partition)
	if tk.Ended < session/2 {
		t.Fatalf("holder gave its lease up %v after the partition: the session could not have expired before %v", tk.Ended, session/2)
	}

	tk.Heal(t, a, node.Heal)
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
	lease := locktest.MustAcquire(t, l, "paused", locker.WithTTL(time.Minute), locker.WithAutoExtend(true))
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
	locktest.WaitFor(t, 10*time.Second, "reconnect to the stopped server", func() bool { return l.conn.State() == zk.StateConnected })
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
	composetest.StartsServersWithin(t, 2*time.Minute) // 38 s on a 2-core machine loaded about 10×
	z := ensemble(t, 3, false)
	l := openClosed(t, z.Addrs(), nil)
	other := openClosed(t, z.Addrs(), nil)
	held := locktest.MustAcquire(t, l, "held", locker.WithTTL(10*time.Minute))

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
	locktest.KeepsGranting(t, "leader "+leader.Name+" killed", l, other, held, 30*time.Second)
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
	locktest.KeepsGranting(t, "client's server "+conn.Name+" killed", l, other, held, 30*time.Second)
	restart(conn)
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
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
			lease := locktest.MustAcquire(t, l, key, locker.WithTTL(time.Minute))
			if hold {
				// Steal once the watch is set: its NodeDeleted ends the lease.
				locktest.WaitFor(t, 5*time.Second, "watch on the lease's znode", func() bool { return mntr(t, addrs[0], "zk_watch_count") > 0 })
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
