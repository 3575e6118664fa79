package compose_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/etcd"
	"github.com/lockbench/lockbench/kinds/zookeeper"
)

// A quorumSystem is a consensus cluster under faults of a majority.
type quorumSystem struct {
	name  string
	start func(ctx context.Context, e *compose.Env, d compose.Durability) ([]*compose.Node, error)
	// write makes the key durable by the cluster's promise (acknowledged
	// by a quorum), through any member.
	write func(ctx context.Context, nodes []*compose.Node, key string) error
	// count returns how many keys with the prefix the cluster has, by a
	// read a quorum agrees on.
	count func(ctx context.Context, nodes []*compose.Node, prefix string) (int, error)
}

var quorumSystems = []quorumSystem{
	{
		name: "zookeeper",
		start: func(ctx context.Context, e *compose.Env, d compose.Durability) ([]*compose.Node, error) {
			z, err := zookeeper.StartEnsemble(ctx, e, compose.Spec{Nodes: 3, Durability: d, LazyFS: true}, zookeeper.Options{})
			if err != nil {
				return nil, err
			}
			return z.Nodes, nil
		},
		write: func(ctx context.Context, nodes []*compose.Node, key string) error {
			return withZK(nodes, func(c *zk.Conn) error {
				_, err := c.Create("/"+key, nil, 0, zk.WorldACL(zk.PermAll))
				return err
			})
		},
		count: func(ctx context.Context, nodes []*compose.Node, prefix string) (n int, err error) {
			err = withZK(nodes, func(c *zk.Conn) error {
				if _, err := c.Sync("/"); err != nil {
					return err
				}
				kids, _, err := c.Children("/")
				for _, k := range kids {
					if strings.HasPrefix(k, prefix) {
						n++
					}
				}
				return err
			})
			return n, err
		},
	},
	{
		name: "etcd",
		start: func(ctx context.Context, e *compose.Env, d compose.Durability) ([]*compose.Node, error) {
			c, err := etcd.StartCluster(ctx, e, compose.Spec{Nodes: 3, Durability: d, LazyFS: true}, etcd.Options{})
			if err != nil {
				return nil, err
			}
			return c.Nodes, nil
		},
		write: func(ctx context.Context, nodes []*compose.Node, key string) error {
			return withEtcd(nodes, func(c *clientv3.Client) error {
				_, err := c.Put(ctx, key, "")
				return err
			})
		},
		count: func(ctx context.Context, nodes []*compose.Node, prefix string) (int, error) {
			var n int
			err := withEtcd(nodes, func(c *clientv3.Client) error {
				resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err == nil {
					n = int(resp.Count)
				}
				return err
			})
			return n, err
		},
	},
}

// writeAcked writes key until the cluster acknowledges it, at most 20
// times 100 ms apart: a busy machine's ensemble drops a client's
// connection now and then ("zk: connection closed" failed a healthy
// cluster's write). A ZooKeeper create tried again that finds its node is
// acknowledged: an earlier attempt was applied, its answer lost.
func writeAcked(ctx context.Context, s quorumSystem, nodes []*compose.Node, key string) error {
	var err error
	for try := range 20 {
		if err = s.write(ctx, nodes, key); err == nil || try > 0 && errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

func withZK(nodes []*compose.Node, f func(*zk.Conn) error) error {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	c, _, err := zk.Connect(addrs, 4*time.Second, zk.WithLogger(zookeeper.NoLog{}))
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

func withEtcd(nodes []*compose.Node, f func(*clientv3.Client) error) error {
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.Addr())
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// TestMajorityFaults kills, wipes or cuts the power of a majority of a
// three-member ZooKeeper ensemble and etcd cluster at once, restarts them
// together and counts what the cluster kept of 100 acknowledged writes:
//
//   - crash (SIGKILL, page cache kept), under the fast profile: everything,
//     and the cluster serves again;
//   - power loss under the durable profile: everything;
//   - power loss under the fast profile, and a restart without data: what
//     each server does is logged, not judged (a consensus member that lost
//     what it acknowledged is outside the protocol's assumptions), once
//     the power loss is shown to have dropped unsynced writes; an etcd
//     majority without data cannot come back at all, and compose says so.
func TestMajorityFaults(t *testing.T) {
	composetest.NeedsLazyFS(t)
	const writes = 100
	for _, s := range quorumSystems {
		for _, tc := range []struct {
			fault string
			d     compose.Durability
		}{
			{"crash", compose.DurabilityFast},
			{"power-loss", compose.DurabilityDurable},
			{"power-loss", compose.DurabilityFast},
			{"restart-empty", compose.DurabilityFast},
		} {
			t.Run(fmt.Sprintf("%s/%s/%s", s.name, tc.fault, tc.d), func(t *testing.T) {
				composetest.StartsServersWithin(t, 3*time.Minute) // up to 50 s on a 2-core machine loaded about 10×
				ctx := composetest.Context(t)
				env := composetest.ForTest(t)
				nodes, err := s.start(ctx, env, tc.d)
				if err != nil {
					t.Fatal(err)
				}
				for i := range writes {
					if err := writeAcked(ctx, s, nodes, fmt.Sprintf("k-%d", i)); err != nil {
						t.Fatalf("write %d: %v", i, err)
					}
				}
				majority := nodes[:2]
				var lost []compose.Unsynced
				switch tc.fault {
				case "crash":
					err = compose.KillAll(majority...)
				case "power-loss":
					lost, err = compose.PowerLossAll(majority...)
				case "restart-empty":
					if err = compose.KillAll(majority...); err == nil {
						err = errors.Join(majority[0].Wipe(), majority[1].Wipe())
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s of %s and %s; unsynced changes dropped: %+v", tc.fault, majority[0].Name, majority[1].Name, lost)
				if tc.fault == "power-loss" && tc.d == compose.DurabilityFast && lost[0].Files+lost[1].Files == 0 {
					t.Fatal("the power loss of members that never fsync dropped nothing: the injection did nothing")
				}
				start := time.Now()
				err = compose.StartAll(ctx, majority...)
				if s.name == "etcd" && tc.fault == "restart-empty" {
					if err == nil || !strings.Contains(err.Error(), "lost the cluster") {
						t.Fatalf("an etcd majority restarted without data: %v; want an error saying the cluster is lost", err)
					}
					t.Logf("as expected: %v", err)
					return
				}
				if err != nil && tc.fault == "power-loss" && tc.d == compose.DurabilityFast {
					// The server's own verdict on a disk that lost what it
					// had acknowledged: logged, not judged.
					t.Logf("the members that lost power did not come back: %v\nwhy, from the logs:\n%s", err, whyEnv(env))
					return
				}
				if err != nil {
					t.Fatalf("restart: %v\nwhy, from the logs:\n%s", err, whyEnv(env))
				}
				kept, err := s.count(ctx, nodes, "k-")
				if err != nil {
					t.Fatalf("count after the restart: %v", err)
				}
				t.Logf("served again %v after the restart began; %d of %d acknowledged writes kept", time.Since(start).Round(time.Millisecond), kept, writes)
				if (tc.fault == "crash" || tc.d == compose.DurabilityDurable) && kept != writes {
					t.Errorf("%s under %s: %d of %d acknowledged writes kept; want all", tc.fault, tc.d, kept, writes)
				}
			})
		}
	}
}
