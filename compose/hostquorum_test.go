package compose_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/etcd"
	"github.com/lockbench/lockbench/kinds/zookeeper"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// placedQuorum is what TestPlacedQuorums does to a cluster: an etcd.Cluster
// and a zookeeper.Ensemble.
type placedQuorum interface {
	Leader(ctx context.Context) (*compose.Node, error)
	AwaitLeader(ctx context.Context, old *compose.Node) (*compose.Node, error)
	PartitionLeader(ctx context.Context) (*compose.Node, error)
	HealPartition() error
	AwaitServing(ctx context.Context) error
	Isolated(ctx context.Context, n *compose.Node) error
}

// TestPlacedQuorums runs an etcd cluster and a ZooKeeper ensemble of
// three members each on three simulated hosts (one of each per host),
// through the same controls as on this machine: each member listens on
// its host's address and the control node reaches it there; the leader
// is cut off from its peers by rules on the hosts (the cut proven from
// the members' hosts, the old leader saying it lost its peers while the
// others elect a new one), healed, paused and resumed, a member restarted
// with and without its data. Close leaves no process, cut or file on any
// host.
func TestPlacedQuorums(t *testing.T) {
	composetest.StartsServersWithin(t, 4*time.Minute)
	lab := remotetest.New(t, 3)
	ctx := composetest.Context(t)
	local, err := etcd.Member()
	if err != nil {
		t.Fatal(err)
	}
	// A host has a /tmp of its own (and a real one need not share this
	// machine's paths at all): the member's program is uploaded, as a run
	// over an inventory does.
	const bin = "/tmp/uploaded/etcd-member" // outside the dirs Close must empty
	var hosts []*remote.SSH
	var etcdOn, zkOn []compose.Placement
	for i, h := range lab.Hosts {
		hosts = append(hosts, lab.Dial(t, i, "root"))
		if err := uploadFile(ctx, hosts[i], local, bin); err != nil {
			t.Fatal(err)
		}
		etcdOn = append(etcdOn, compose.Placement{Host: hosts[i], Addr: h.Addr, Port: 2379, Dir: "/tmp/lockbench/etcd", Binary: bin})
		zkOn = append(zkOn, compose.Placement{Host: hosts[i], Addr: h.Addr, Port: 2181, Dir: "/tmp/lockbench/zookeeper"})
	}
	env := composetest.ForTest(t)
	etcd, err := etcd.StartCluster(ctx, env, compose.Spec{Nodes: 3, On: etcdOn}, etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	zk, err := zookeeper.StartEnsemble(ctx, env, compose.Spec{Nodes: 3, On: zkOn}, zookeeper.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clusters := []struct {
		name  string
		q     placedQuorum
		nodes []*compose.Node
		port  int
	}{
		{"etcd", etcd, etcd.Nodes, 2379},
		{"zookeeper", zk, zk.Nodes, 2181},
	}
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			for i, n := range c.nodes {
				if n.Host().Name() != lab.Hosts[i].Name || n.ServerAddr() != lab.Hosts[i].Addr.String()+":"+strconv.Itoa(c.port) {
					t.Fatalf("%s runs on %s at %s, want %s at %s:%d", n.Name, n.Host().Name(), n.ServerAddr(), lab.Hosts[i].Name, lab.Hosts[i].Addr, c.port)
				}
			}
			old, err := c.q.PartitionLeader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cuts, err := remote.CutsInForce(ctx, old.Host())
			if err != nil || len(cuts) == 0 {
				t.Errorf("no cut on the old leader's host %s: %v (%v)", old.Host().Name(), cuts, err)
			}
			for {
				err := c.q.Isolated(ctx, old)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("%s never said it lost its peers: %v", old.Name, err)
				}
				time.Sleep(50 * time.Millisecond) // polling the member's own word
			}
			leader, err := c.q.AwaitLeader(ctx, old)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s cut off (it says so); %s leads now", old.Name, leader.Name)
			if err := c.q.HealPartition(); err != nil {
				t.Fatal(err)
			}
			if cuts, err := remote.CutsInForce(ctx, old.Host()); err != nil || len(cuts) > 0 {
				t.Errorf("cuts left after the heal on %s: %v (%v)", old.Host().Name(), cuts, err)
			}
			if err := c.q.AwaitServing(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.q.Isolated(ctx, old); err == nil {
				t.Errorf("%s still isolated after the heal", old.Name)
			}

			follower := c.nodes[slices.IndexFunc(c.nodes, func(n *compose.Node) bool { return n != leader })]
			if err := follower.Pause(); err != nil {
				t.Fatal(err)
			}
			qctx, qcancel := context.WithTimeout(ctx, time.Second)
			if err := c.q.Isolated(qctx, follower); err == nil {
				t.Errorf("paused %s answered", follower.Name)
			}
			qcancel()
			if err := follower.Resume(); err != nil {
				t.Fatal(err)
			}
			for _, keep := range []bool{true, false} {
				pid := follower.PID()
				if err := follower.Restart(ctx, keep); err != nil {
					t.Fatalf("restart keeping data %v: %v", keep, err)
				}
				if follower.PID() == pid {
					t.Errorf("restart keeping data %v: pid %d before and after", keep, pid)
				}
			}
			if err := c.q.AwaitServing(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.q.Leader(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if kept, err := env.Prune(); err != nil || len(kept) > 0 {
		t.Errorf("prune: kept %v (%v)", kept, err)
	}
	for i, h := range hosts {
		if left, err := remotetest.Leftovers(ctx, h, "/tmp/lockbench"); err != nil || len(left) > 0 {
			t.Errorf("%s: left %v (%v)", lab.Hosts[i].Name, left, err)
		}
	}
}

// uploadFile copies the local file src to dst on host r, executable.
func uploadFile(ctx context.Context, r remote.Remote, src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return remote.Upload(ctx, r, f, dst, 0o755)
}
