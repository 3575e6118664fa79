package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
)

// TestMemberDown checks that a three-member cluster keeps granting with
// one member down: first a follower, then the leader (after a new one is
// elected). A lease held all along survives both, and can be extended.
func TestMemberDown(t *testing.T) {
	t.Parallel()
	c := cluster(t, 3, false)
	l := openClosed(t, c.Endpoints(), nil)
	other := openClosed(t, c.Endpoints(), nil)
	held := mustAcquire(t, l, "held", locker.WithTTL(10*time.Minute))

	loop := func(t *testing.T, what string) {
		t.Helper()
		start := time.Now()
		for i := range 20 {
			lc := l
			if i%2 == 1 {
				lc = other
			}
			// Generous: the first grants may wait for an election and
			// for the clients to give up on the dead member.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			lease, err := lc.Acquire(ctx, "loop", locker.WithTTL(30*time.Second))
			if err != nil {
				cancel()
				t.Fatalf("%s: Acquire %d: %v", what, i, err)
			}
			err = lease.Release(ctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: Release %d: %v", what, i, err)
			}
		}
		t.Logf("%s: 20 grants in %v", what, time.Since(start).Round(time.Millisecond))
		if err := held.Err(); err != nil {
			t.Fatalf("%s: the lease held all along ended: %v", what, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
	loop(t, "follower "+follower.Name+" killed")
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
	loop(t, "leader "+leader.Name+" killed")
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
	held := mustAcquire(t, a, key, locker.WithTTL(ttl), locker.WithAutoExtend(true))

	type grant struct {
		lease locker.Lease
		err   error
		at    time.Time
	}
	granted := make(chan grant, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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
