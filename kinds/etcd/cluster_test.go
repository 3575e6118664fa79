package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/etcd"
	"github.com/lockbench/lockbench/kinds/etcd/etcdtest"
)

// etcdPut writes key through c, retrying for up to 20 s while the cluster
// elects a leader or the client finds a live endpoint.
func etcdPut(t *testing.T, c *clientv3.Client, key, val string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Put(ctx, key, val)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("put %s: %v", key, err)
		}
	}
}

// etcdGet reads key from the member at endpoint alone, without going
// through the leader (a serializable read), so it shows what that member
// has applied.
func etcdGet(t *testing.T, endpoint, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := etcdtest.Client(t, endpoint).Get(ctx, key, clientv3.WithSerializable())
	if err != nil {
		t.Fatalf("get %s from %s: %v", key, endpoint, err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func TestEtcdSingle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := composetest.ForTest(t)
	c, err := etcd.StartCluster(ctx, env, compose.Spec{Nodes: 1, Proxied: true}, etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if eps := c.Endpoints(); len(eps) != 1 || eps[0] != c.Nodes[0].Proxy().Addr() {
		t.Fatalf("Endpoints = %v, want the member's proxy", eps)
	}
	if l, err := c.Leader(ctx); err != nil || l != c.Nodes[0] {
		t.Fatalf("Leader = %v, %v; want the only member", l, err)
	}
	cli := etcdtest.Client(t, c.Endpoints()...)
	etcdPut(t, cli, "k", "v")
	if got := etcdGet(t, c.Endpoints()[0], "k"); got != "v" {
		t.Fatalf("get k = %q, want v", got)
	}
}

func TestEtcdBadSize(t *testing.T) {
	env := composetest.ForTest(t)
	for _, n := range []int{0, 2, -3} {
		if _, err := etcd.StartCluster(context.Background(), env, compose.Spec{Nodes: n}, etcd.Options{}); err == nil {
			t.Errorf("Etcd(%d) succeeded", n)
		}
	}
	o := etcd.Options{HeartbeatInterval: 100 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond}
	if _, err := etcd.StartCluster(context.Background(), env, compose.Spec{Nodes: 1}, o); err == nil {
		t.Error("an election timeout of 2 heartbeats was accepted")
	}
}

func TestEtcdLeaderKillPauseRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := composetest.ForTest(t)
	c, err := etcd.StartCluster(ctx, env, compose.Spec{Nodes: 3}, etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.Client(t, c.Endpoints()...)
	etcdPut(t, cli, "before", "v")

	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	next, err := c.AwaitLeader(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed, %s elected in %v", leader.Name, next.Name, time.Since(start))
	etcdPut(t, cli, "after-kill", "v")

	// Pausing the new leader too leaves one live member of three: no
	// quorum, no writes. Resuming it restores both.
	if err := next.Pause(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	_, err = cli.Put(short, "during-pause", "v")
	cancel()
	if err == nil {
		t.Fatal("a write succeeded with one member of three running")
	}
	if err := next.Resume(); err != nil {
		t.Fatal(err)
	}
	etcdPut(t, cli, "after-resume", "v")

	// The killed member comes back, with and without its data, and
	// catches up with what was written while it was down.
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keepData=%v", keep), func(t *testing.T) {
			key := fmt.Sprintf("restart-%v", keep)
			etcdPut(t, cli, key, "v")
			if err := leader.Restart(ctx, keep); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"before", "after-kill", "after-resume", key} {
				if got := etcdGet(t, leader.Addr(), k); got != "v" {
					t.Fatalf("get %s from the restarted member = %q, want v", k, got)
				}
			}
		})
	}
}
