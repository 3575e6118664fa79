package sentinel_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/sentinel"
	"github.com/lockbench/lockbench/remote"
)

// The faults of a Sentinel set's Redis nodes, made as on standalone Redis
// nodes: a power loss (LazyFS), a clock jump (FakeClock) and a cut of the
// clients (Netns).

// TestSentinelPowerLoss cuts the power of a Sentinel set's master and
// replica together after a write both acknowledged (WAIT), and reads the
// key back on the master the sentinels report once both are up again:
// gone under the fast profile (neither persists anything), kept under the
// durable one (appendfsync always).
func TestSentinelPowerLoss(t *testing.T) {
	composetest.NeedsLazyFS(t)
	for _, tc := range []struct {
		d    compose.Durability
		kept bool
	}{
		{compose.DurabilityFast, false},
		{compose.DurabilityDurable, true},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := sentinel.StartSet(ctx, composetest.ForTest(t), compose.Spec{LazyFS: true, Durability: tc.d}, sentinel.Options{})
			if err != nil {
				t.Fatal(err)
			}
			m := composetest.RedisClient(t, s.Master.Addr(), 3*time.Second)
			if err := m.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			waitReplicated(t, m, 1)
			lost, err := compose.PowerLossAll(s.Nodes()...)
			if err != nil {
				t.Fatal(err)
			}
			if err := compose.StartAll(ctx, s.Nodes()...); err != nil {
				t.Fatal(err)
			}
			cur, err := s.CurrentMaster(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, err := composetest.RedisClient(t, cur, 3*time.Second).Exists(ctx, "k").Result()
			if err != nil {
				t.Fatal(err)
			}
			if (got == 1) != tc.kept {
				t.Fatalf("after a power loss of master and replica (%s), the master %s has k: %v, want %v (dropped: %+v)", tc.d, cur, got == 1, tc.kept, lost)
			}
		})
	}
}

// TestSentinelClockJump jumps the wall clock of a Sentinel set's master:
// a key with a minute to live expires at once, as on a standalone Redis
// node, and the master's clock is read back two minutes ahead. The
// sentinels, on the real clock, keep the master.
func TestSentinelClockJump(t *testing.T) {
	if err := compose.FakeClockAvailable(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	s, err := sentinel.StartSet(ctx, composetest.ForTest(t), compose.Spec{FakeClock: true}, sentinel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Nodes() {
		if !n.HasFakeClock() {
			t.Fatalf("%s runs without the clock preload", n.Name)
		}
	}
	for _, n := range s.Sentinels {
		if n.HasFakeClock() {
			t.Fatalf("sentinel %s runs under the clock preload", n.Name)
		}
	}
	m := composetest.RedisClient(t, s.Master.Addr(), 3*time.Second)
	if err := m.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := s.Master.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Master.JumpClock(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	after, err := s.Master.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if moved := after.Sub(before); moved < 2*time.Minute || moved > 2*time.Minute+10*time.Second {
		t.Fatalf("the master's clock moved %v, want 2m", moved)
	}
	if n, err := m.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after the master's clock jumped past its expiry = %d, %v; want 0", n, err)
	}
	if cur, err := s.CurrentMaster(ctx); err != nil || cur != s.Master.ServerAddr() {
		t.Fatalf("the sentinels report master %q, %v; want %s still", cur, err, s.Master.ServerAddr())
	}
}

// TestSentinelCutClients cuts a Sentinel set's master, in a network
// namespace of its own, off from this host, where its clients and the
// sentinels run: a connection from here times out, while the replica, in
// a namespace of its own, still reaches the master (a write made from the
// replica's namespace is replicated to it). The sentinels, cut off too,
// promote the replica; after the heal they make the old master its
// replica.
func TestSentinelCutClients(t *testing.T) {
	composetest.NeedsPeerNetwork(t)
	ctx := context.Background()
	e := composetest.ForTest(t)
	_, err := sentinel.StartSet(ctx, e, compose.Spec{Netns: true}, sentinel.Options{ProxiedReplication: true})
	if err == nil || !strings.Contains(err.Error(), "ProxiedReplication") {
		t.Fatalf("a set in namespaces with its replication through this host's proxies: %v; want an error naming ProxiedReplication", err)
	}
	s, err := sentinel.StartSet(ctx, e, compose.Spec{Netns: true}, sentinel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := s.Master.ServerAddr()
	if strings.HasPrefix(old, "127.") {
		t.Fatalf("the master listens at %s, not in a namespace of its own", old)
	}
	if err := s.Master.CutClients(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	if err := s.Master.Unreachable(ctx, time.Second); err != nil {
		t.Fatalf("during the cut: %v", err)
	}
	// From the replica's namespace the master is still there: replication
	// does not pass through this host.
	replica := s.Replicas[0]
	host, port, _ := net.SplitHostPort(old)
	out, err := remote.Output(ctx, replica.Host(), "redis-cli", "-h", host, "-p", port, "SET", "from-replica-ns", "v")
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("SET on the master from the replica's namespace during the cut: %q, %v", out, err)
	}
	promoted, err := s.AwaitNewMaster(ctx, old)
	if err != nil {
		t.Fatalf("the sentinels, cut off from the master, did not fail it over: %v", err)
	}
	t.Logf("the sentinels promoted %s %v after the cut", promoted, time.Since(cut))
	if promoted != replica.ServerAddr() {
		t.Fatalf("the sentinels promoted %s, want the replica %s", promoted, replica.ServerAddr())
	}
	if v, err := composetest.RedisClient(t, promoted, 3*time.Second).Get(ctx, "from-replica-ns").Result(); err != nil || v != "v" {
		t.Fatalf("the promoted replica lacks the write made on the master during the cut: %q, %v", v, err)
	}
	if err := s.Master.HealClients(); err != nil {
		t.Fatal(err)
	}
	// Back in reach, the old master is demoted by the sentinels.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	oc := composetest.RedisClient(t, old, 3*time.Second)
	for {
		role, err := oc.Do(wctx, "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "slave" {
			return
		}
		select {
		case <-wctx.Done():
			t.Fatalf("the old master 30 s after the heal: ROLE %v, %v; want slave", role, err)
		case <-tick.C:
		}
	}
}
