package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// TestMemberDown checks that a three-member cluster keeps granting with
// one member down: first a follower, then the leader (after a new one is
// elected). A lease held all along survives both, and can be extended.
func TestMemberDown(t *testing.T) {
	t.Parallel()
	c := cluster(t, 3, false)
	l := openClosed(t, c.Endpoints(), nil)
	other := openClosed(t, c.Endpoints(), nil)
	held := locktest.MustAcquire(t, l, "held", locker.WithTTL(10*time.Minute))

	restart := func(n *compose.Node) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var follower *compose.Node
	for _, n := range c.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	if err := follower.Kill(); err != nil {
		t.Fatal(err)
	}
	locktest.KeepsGranting(t, "follower "+follower.Name+" killed", l, other, held, time.Minute)
	restart(follower)

	if leader, err = c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	next, err := c.AwaitLeader(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s killed, %s elected", leader.Name, next.Name)
	locktest.KeepsGranting(t, "leader "+leader.Name+" killed", l, other, held, time.Minute)
	restart(leader)
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPartitionedHolder cuts an auto-extending holder off from a
// one-member cluster (through the member's proxy) while another client,
// which reaches the member directly, waits for the key. The server
// expires the holder's lease and grants the key to the other client; by
// then the holder's lease must have ended with ErrLost, since it could
// not extend it. Once the partition heals the holder's Locker works again.
func TestPartitionedHolder(t *testing.T) {
	t.Parallel()
	node := cluster(t, 1, true).Nodes[0]
	a := openClosed(t, []string{node.Addr()}, nil)
	b := openClosed(t, []string{node.ServerAddr()}, nil)
	const key, ttl = "partition", 2 * time.Second
	held := locktest.MustAcquire(t, a, key, locker.WithTTL(ttl), locker.WithAutoExtend(true))

	tk := locktest.CutOff(t, held, b, time.Minute, node.Partition)

	tk.Heal(t, a, node.Heal)
}
