package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/zookeeper"
)

func zkConnect(t *testing.T, addrs []string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(addrs, 4*time.Second, zk.WithLogger(zookeeper.NoLog{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// zkRetry retries op while the client reconnects (a leader election, a
// server that just restarted), for up to 20 s.
func zkRetry(t *testing.T, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) && !errors.Is(err, zk.ErrSessionMoved) {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after 20s", what, err)
		}
	}
}

func zkCreate(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	zkRetry(t, "create "+path, func() error {
		_, err := c.Create(path, []byte("v"), 0, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNodeExists) {
			return nil // a retry after the first attempt succeeded
		}
		return err
	})
}

func zkExists(t *testing.T, c *zk.Conn, path string) bool {
	t.Helper()
	var ok bool
	zkRetry(t, "exists "+path, func() (err error) {
		ok, _, err = c.Exists(path)
		return err
	})
	return ok
}

func TestZooKeeperStandalone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := composetest.ForTest(t)
	z, err := zookeeper.StartEnsemble(ctx, env, compose.Spec{Nodes: 1, Proxied: true}, zookeeper.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(z.Nodes) != 1 || z.Addrs()[0] != z.Nodes[0].Proxy().Addr() {
		t.Fatalf("ensemble %v: want one node reached through its proxy", z.Addrs())
	}
	if l, err := z.Leader(ctx); err != nil || l != z.Nodes[0] {
		t.Fatalf("Leader = %v, %v; want the standalone server", l, err)
	}
	c := zkConnect(t, z.Addrs())
	zkCreate(t, c, "/lock")
	if !zkExists(t, c, "/lock") {
		t.Fatal("/lock does not exist after Create")
	}
}

func TestZooKeeperBadSize(t *testing.T) {
	env := composetest.ForTest(t)
	for _, n := range []int{0, 2, -1} {
		if _, err := zookeeper.StartEnsemble(context.Background(), env, compose.Spec{Nodes: n}, zookeeper.Options{}); err == nil {
			t.Errorf("ZooKeeper(%d) succeeded", n)
		}
	}
}

func TestZooKeeperLeaderKillRestart(t *testing.T) {
	t.Parallel()
	composetest.StartsServersWithin(t, 3*time.Minute) // 40 s on a 2-core machine loaded about 10×
	ctx := context.Background()
	env := composetest.ForTest(t)
	z, err := zookeeper.StartEnsemble(ctx, env, compose.Spec{Nodes: 3}, zookeeper.Options{})
	if err != nil {
		t.Fatal(err)
	}
	leader, err := z.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := zkConnect(t, z.Addrs())
	zkCreate(t, c, "/before")

	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	next, err := z.AwaitLeader(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed, %s elected in %v", leader.Name, next.Name, time.Since(start))
	zkCreate(t, c, "/after")

	// The old leader comes back with its data, as a follower, and has
	// caught up with what was written while it was down.
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keepData=%v", keep), func(t *testing.T) {
			if err := leader.Restart(ctx, keep); err != nil {
				t.Fatal(err)
			}
			if mode, err := z.Mode(ctx, leader); err != nil || mode != "follower" {
				t.Fatalf("restarted old leader: mode %q, %v; want follower", mode, err)
			}
			only := zkConnect(t, []string{leader.Addr()})
			for _, p := range []string{"/before", "/after"} {
				// A follower may serve a read before it has applied the
				// latest writes; sync first, as a client must.
				zkRetry(t, "sync", func() error { _, err := only.Sync(p); return err })
				if !zkExists(t, only, p) {
					t.Fatalf("%s missing on the restarted server", p)
				}
			}
		})
	}
}

// TestZooKeeperSessionIgnoresClockJump checks that ZooKeeper times
// sessions on its monotonic clock: a session of 2 s outlives a jump of the
// server's wall clock by an hour, forward or back, and its ephemeral node
// stays.
func TestZooKeeperSessionIgnoresClockJump(t *testing.T) {
	ctx := context.Background()
	z, err := zookeeper.StartEnsemble(ctx, composetest.ForTest(t), compose.Spec{Nodes: 1, FakeClock: true}, zookeeper.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, events, err := zk.Connect(z.Addrs(), 2*time.Second, zk.WithLogger(zookeeper.NoLog{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	zkRetry(t, "create the ephemeral node", func() error {
		_, err := c.Create("/holder", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		return err
	})
	session := c.SessionID()
	for _, d := range []time.Duration{time.Hour, -2 * time.Hour} {
		if err := z.Nodes[0].JumpClock(d); err != nil {
			t.Fatal(err)
		}
		// Three session timeouts on the real clock: an expiry by the
		// wall clock would have happened.
		deadline := time.After(6 * time.Second)
	wait:
		for {
			select {
			case ev := <-events:
				if ev.State == zk.StateExpired {
					t.Fatalf("the session expired after a jump of the server's clock by %v", d)
				}
			case <-deadline:
				break wait
			}
		}
		if ok, _, err := c.Exists("/holder"); err != nil || !ok || c.SessionID() != session {
			t.Fatalf("after a jump by %v: ephemeral node exists %v (%v), session %x (was %x)", d, ok, err, c.SessionID(), session)
		}
	}
}
