package compose_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/etcd"
	"github.com/lockbench/lockbench/kinds/etcd/etcdtest"
	"github.com/lockbench/lockbench/kinds/zookeeper"
)

// quorum is what the partition tests need of an etcd cluster or a
// ZooKeeper ensemble started with Netns.
type quorum struct {
	nodes         []*compose.Node
	leader        func(context.Context) (*compose.Node, error)
	awaitLeader   func(context.Context, *compose.Node) (*compose.Node, error)
	partition     func(...[]*compose.Node) error
	heal          func() error
	awaitServing  func(context.Context) error
	partitionLead func(context.Context) (*compose.Node, error)
	// write makes one write through clients of via alone, bounded by d.
	write func(t *testing.T, via []*compose.Node, key string, d time.Duration) error
	// follows returns nil once n serves as a follower of leader.
	follows func(ctx context.Context, n, leader *compose.Node) error
	// leads reports whether n says it leads (a member that does not
	// answer does not).
	leads func(ctx context.Context, n *compose.Node) bool
}

// writeTimeout bounds a write that must fail: through a member cut off
// from the quorum, it never completes.
const writeTimeout = 3 * time.Second

func etcdQuorum(t *testing.T, c *etcd.Cluster) *quorum {
	// One client asks every member for its status, each directly.
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.ServerAddr())
	}
	cli := etcdtest.Client(t, eps...)
	status := func(ctx context.Context, n *compose.Node) (*clientv3.StatusResponse, error) {
		return cli.Status(ctx, n.ServerAddr())
	}
	return &quorum{
		nodes: c.Nodes, leader: c.Leader, awaitLeader: c.AwaitLeader,
		partition: c.Partition, heal: c.HealPartition, awaitServing: c.AwaitServing,
		partitionLead: c.PartitionLeader,
		write: func(t *testing.T, via []*compose.Node, key string, d time.Duration) error {
			var eps []string
			for _, n := range via {
				eps = append(eps, n.Addr())
			}
			cli := etcdtest.Client(t, eps...)
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			_, err := cli.Put(ctx, key, "v")
			return err
		},
		follows: func(ctx context.Context, n, leader *compose.Node) error {
			st, err := status(ctx, n)
			if err != nil {
				return err
			}
			lst, err := status(ctx, leader)
			if err != nil {
				return err
			}
			if st.Leader != lst.Header.MemberId || st.Leader == st.Header.MemberId {
				return fmt.Errorf("%s: leader %x, want %s's %x", n.Name, st.Leader, leader.Name, lst.Header.MemberId)
			}
			return nil
		},
		leads: func(ctx context.Context, n *compose.Node) bool {
			st, err := status(ctx, n)
			return err == nil && st.Leader == st.Header.MemberId
		},
	}
}

func zkQuorum(z *zookeeper.Ensemble) *quorum {
	return &quorum{
		nodes: z.Nodes, leader: z.Leader, awaitLeader: z.AwaitLeader,
		partition: z.Partition, heal: z.HealPartition, awaitServing: z.AwaitServing,
		partitionLead: z.PartitionLeader,
		write: func(t *testing.T, via []*compose.Node, key string, d time.Duration) error {
			var addrs []string
			for _, n := range via {
				addrs = append(addrs, n.Addr())
			}
			c, _, err := zk.Connect(addrs, 4*time.Second, zk.WithLogger(zookeeper.NoLog{}))
			if err != nil {
				return err
			}
			// The client has no deadline of its own: closing it ends a
			// request that is still waiting.
			done := make(chan error, 1)
			go func() {
				_, err := c.Create("/"+key, []byte("v"), 0, zk.WorldACL(zk.PermAll))
				done <- err
			}()
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case err = <-done:
				c.Close()
			case <-timer.C:
				c.Close()
				err = fmt.Errorf("create /%s: no answer in %v (then %v)", key, d, <-done)
			}
			return err
		},
		follows: func(ctx context.Context, n, leader *compose.Node) error {
			mode, err := z.Mode(ctx, n)
			if err != nil {
				return err
			}
			if mode != "follower" {
				return fmt.Errorf("%s is %s, want follower", n.Name, mode)
			}
			return nil
		},
		leads: func(ctx context.Context, n *compose.Node) bool {
			mode, err := z.Mode(ctx, n)
			return err == nil && mode == "leader"
		},
	}
}

// eventually calls check every 20 ms until it returns nil, failing t
// with its last error after d. It returns how long it took.
func eventually(t *testing.T, d time.Duration, what string, check func(context.Context) error) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: still %v after %v", what, err, d)
		}
		<-tick.C
	}
}

// electedWithout waits until a member other than old says it leads, asking
// those members only, every 20 ms, and returns how long that took since
// start: the election time, measured more finely than Leader can (which
// waits for every member's answer, a second for a paused one).
func (q *quorum) electedWithout(t *testing.T, old *compose.Node, start time.Time) time.Duration {
	t.Helper()
	eventually(t, time.Minute, "a new leader", func(ctx context.Context) error {
		for _, n := range except(q.nodes, old) {
			if q.leads(ctx, n) {
				return nil
			}
		}
		return errors.New("no other member leads")
	})
	return time.Since(start)
}

// converge waits until every member serves and each follows one leader,
// which it returns, and logs how long that took since start.
func (q *quorum) converge(t *testing.T, start time.Time, after string) *compose.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := q.awaitServing(ctx); err != nil {
		t.Fatalf("after %s: %v", after, err)
	}
	var leader *compose.Node
	eventually(t, time.Minute, "one leader after "+after, func(ctx context.Context) error {
		l, err := q.leader(ctx)
		if err != nil {
			return err
		}
		for _, n := range q.nodes {
			if n == l {
				continue
			}
			if err := q.follows(ctx, n, l); err != nil {
				return err
			}
		}
		leader = l
		return nil
	})
	t.Logf("%s -> every member serves, following %s: %v", after, leader.Name, time.Since(start).Round(time.Millisecond))
	return leader
}

func except(nodes []*compose.Node, out ...*compose.Node) []*compose.Node {
	return slices.DeleteFunc(slices.Clone(nodes), func(n *compose.Node) bool { return slices.Contains(out, n) })
}

// mustWrite writes through via, retrying while the cluster elects (up to
// 20 s). A retried ZooKeeper create that finds its node is done: an
// earlier attempt was applied, and its answer came too late (a busy
// machine) or not at all.
func (q *quorum) mustWrite(t *testing.T, via []*compose.Node, key string) {
	t.Helper()
	var err error
	for start, retry := time.Now(), false; time.Since(start) < 20*time.Second; retry = true {
		if err = q.write(t, via, key, 2*time.Second); err == nil || retry && errors.Is(err, zk.ErrNodeExists) {
			return
		}
	}
	t.Fatalf("write %s: %v", key, err)
}

// mustNotWrite checks that a write through via alone fails.
func (q *quorum) mustNotWrite(t *testing.T, via []*compose.Node, key string) {
	t.Helper()
	start := time.Now()
	err := q.write(t, via, key, writeTimeout)
	if err == nil {
		t.Fatalf("write %s through %s, cut off from the quorum, succeeded", key, via[0].Name)
	}
	t.Logf("write through the cut-off %s: failed after %v: %v", via[0].Name, time.Since(start).Round(time.Millisecond), err)
}

// testPartitions runs, on one cluster, the member faults of the fault
// catalogue, each ending healed: the leader paused, the leader cut off, a
// minority cut off, the leader killed and restarted. The pause comes first
// so that its election time is that of a fresh cluster: after a heal, the
// members' TCP connections that lived through the cut may still be in
// retransmission backoff for seconds, which slows the next election.
func testPartitions(t *testing.T, q *quorum) {
	ctx := context.Background()
	q.converge(t, time.Now(), "start")
	q.mustWrite(t, q.nodes, "before")

	t.Run("pause-leader", func(t *testing.T) {
		old, err := q.leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := old.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = old.Resume() })
		elected := q.electedWithout(t, old, start)
		next, err := q.awaitLeader(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s paused -> %s elected after %v (seen by Leader, which waits 1 s for the paused one, after %v)", old.Name, next.Name, elected.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		q.mustWrite(t, except(q.nodes, old), "pause-majority")
		start = time.Now()
		if err := old.Resume(); err != nil {
			t.Fatal(err)
		}
		took := eventually(t, time.Minute, old.Name+" rejoins as a follower", func(ctx context.Context) error {
			return q.follows(ctx, old, next)
		})
		t.Logf("%s resumed -> follows %s: %v", old.Name, next.Name, took.Round(time.Millisecond))
		q.converge(t, start, "resume")
		q.mustWrite(t, []*compose.Node{old}, "pause-resumed")
	})

	t.Run("partition-leader", func(t *testing.T) {
		start := time.Now()
		old, err := q.partitionLead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		elected := q.electedWithout(t, old, start)
		next, err := q.awaitLeader(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s cut off -> %s elected after %v (seen by Leader after %v)", old.Name, next.Name, elected.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		eventually(t, time.Minute, old.Name+" steps down", func(ctx context.Context) error {
			if q.leads(ctx, old) {
				return errors.New("still leads")
			}
			return nil
		})
		t.Logf("%s cut off -> no longer says it leads after %v", old.Name, time.Since(start).Round(time.Millisecond))
		q.mustWrite(t, except(q.nodes, old), "majority")
		q.mustNotWrite(t, []*compose.Node{old}, "isolated")

		start = time.Now()
		if err := q.heal(); err != nil {
			t.Fatal(err)
		}
		q.converge(t, start, "heal")
		for _, n := range q.nodes {
			q.mustWrite(t, []*compose.Node{n}, "healed-"+n.Name)
		}
	})

	t.Run("partition-halves", func(t *testing.T) {
		leader, err := q.leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		minority := except(q.nodes, leader)[:len(q.nodes)/2]
		majority := except(q.nodes, minority...)
		if err := q.partition(minority); err != nil {
			t.Fatal(err)
		}
		q.mustWrite(t, majority, "halves-majority")
		q.mustNotWrite(t, minority, "halves-minority")
		if l, err := q.leader(ctx); err != nil || l != leader {
			t.Errorf("leader with a minority of followers cut off: %v, %v; want %s still", l, err, leader.Name)
		}
		start := time.Now()
		if err := q.heal(); err != nil {
			t.Fatal(err)
		}
		q.converge(t, start, "heal")
		q.mustWrite(t, minority, "halves-healed")
	})

	// Kill and Restart (which, without the data, replaces an etcd
	// member through the others) work on members in namespaces.
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("restart-leader/keepData=%v", keep), func(t *testing.T) {
			old, err := q.leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := old.Kill(); err != nil {
				t.Fatal(err)
			}
			if _, err := q.awaitLeader(ctx, old); err != nil {
				t.Fatal(err)
			}
			q.mustWrite(t, except(q.nodes, old), fmt.Sprintf("restart-%v", keep))
			start := time.Now()
			if err := old.Restart(ctx, keep); err != nil {
				t.Fatal(err)
			}
			q.converge(t, start, "restart")
			q.mustWrite(t, []*compose.Node{old}, fmt.Sprintf("restarted-%v", keep))
		})
	}
}

func TestEtcdPeerPartitions(t *testing.T) {
	t.Parallel() // before anything that arms a deadline: a paused test waits for the others
	composetest.NeedsPeerNetwork(t)
	composetest.StartsServersWithin(t, 2*time.Minute) // 37 s on a 2-core machine loaded about 10×
	env := composetest.ForTest(t)
	// Proxied too: clients go through the proxies, members talk directly.
	c, err := etcd.StartCluster(context.Background(), env, compose.Spec{Nodes: 3, Netns: true, Proxied: true}, etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testPartitions(t, etcdQuorum(t, c))
}

func TestZooKeeperPeerPartitions(t *testing.T) {
	t.Parallel() // before anything that arms a deadline: a paused test waits for the others
	composetest.NeedsPeerNetwork(t)
	composetest.StartsServersWithin(t, 5*time.Minute) // 101 s on a 2-core machine loaded about 10×
	env := composetest.ForTest(t)
	z, err := zookeeper.StartEnsemble(context.Background(), env, compose.Spec{Nodes: 3, Netns: true, Proxied: true}, zookeeper.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testPartitions(t, zkQuorum(z))
}

// TestPartitionNeedsPeerNetwork checks that a cluster started without
// PeerNetwork refuses to be partitioned, saying why.
func TestPartitionNeedsPeerNetwork(t *testing.T) {
	t.Parallel()
	env := composetest.ForTest(t)
	c, err := etcd.StartCluster(context.Background(), env, compose.Spec{Nodes: 1}, etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Partition":     c.Partition(c.Nodes),
		"HealPartition": c.HealPartition(),
	} {
		if err == nil || !strings.Contains(err.Error(), "Netns") {
			t.Errorf("%s without Netns: %v; want an error naming Netns", name, err)
		}
	}
}

// TestEtcdPeerPartitionHalvesWithLeader splits five members into a
// minority of two that holds the leader and a majority of three: the
// majority elects a leader of its own and serves writes, the minority —
// whose two members still talk to each other — serves none, and after
// the heal all five follow one leader.
func TestEtcdPeerPartitionHalvesWithLeader(t *testing.T) {
	t.Parallel() // before anything that arms a deadline: a paused test waits for the others
	composetest.NeedsPeerNetwork(t)
	ctx := context.Background()
	env := composetest.ForTest(t)
	c, err := etcd.StartCluster(ctx, env, compose.Spec{Nodes: 5, Netns: true}, etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := etcdQuorum(t, c)
	q.converge(t, time.Now(), "start")
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	minority := []*compose.Node{old, except(c.Nodes, old)[0]}
	majority := except(c.Nodes, minority...)
	start := time.Now()
	if err := c.Partition(minority); err != nil {
		t.Fatal(err)
	}
	next, err := c.AwaitLeader(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(minority, next) {
		t.Fatalf("%s of the minority leads", next.Name)
	}
	t.Logf("minority %s+%s cut off -> %s elected (seen by Leader): %v", minority[0].Name, minority[1].Name, next.Name, time.Since(start).Round(time.Millisecond))
	q.mustWrite(t, majority, "majority")
	q.mustNotWrite(t, minority, "minority")
	start = time.Now()
	if err := c.HealPartition(); err != nil {
		t.Fatal(err)
	}
	q.converge(t, start, "heal")
	q.mustWrite(t, minority, "healed")
}
