package compose_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
)

func TestProxyPartitionDelayHeal(t *testing.T) {
	ctx := context.Background()
	env := composetest.ForTest(t)
	nodes, err := redis.StartServers(ctx, env, compose.Spec{Nodes: 1, Proxied: true}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := nodes[0]
	if n.Addr() == n.ServerAddr() {
		t.Fatal("a proxied node's Addr is the server's own")
	}
	c := composetest.RedisClient(t, n.Addr(), 300*time.Millisecond)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	if err := n.Partition(); err != nil {
		t.Fatal(err)
	}
	err = c.Ping(ctx).Err()
	var netErr interface{ Timeout() bool }
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("PING across a partition = %v, want a timeout", err)
	}
	if err := composetest.RedisClient(t, n.ServerAddr(), 300*time.Millisecond).Ping(ctx).Err(); err != nil {
		t.Fatalf("the server itself should still answer: %v", err)
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Heal: %v", err)
	}

	if err := n.Delay(150 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// A lower bound only: the delay is what the fault adds, whatever the
	// machine's speed.
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("PING through a 150ms delay took %v", took)
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
}

// TestPruneKeepsOnlyLogsAndFailedData: after a run, the data of the
// servers goes and their logs stay; a server that died when nobody
// stopped it keeps its data, for diagnosis.
func TestPruneKeepsOnlyLogsAndFailedData(t *testing.T) {
	composetest.StartsServers(t)
	e, err := compose.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := redis.StartServers(ctx, e, compose.Spec{Nodes: 2, Durability: compose.DurabilityDurable}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	crashed, fine := nodes[0], nodes[1]
	if err := fine.Kill(); err != nil { // a fault: not a failure
		t.Fatal(err)
	}
	if err := fine.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(crashed.PID(), syscall.SIGKILL); err != nil { // behind compose's back: a crash
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !crashed.Failed(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("compose did not notice the crash in a minute")
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	kept, err := e.Prune()
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0] != crashed.Name || fine.Failed() {
		t.Fatalf("kept %v (failed: %s %v, %s %v): want only the crashed node's data", kept, crashed.Name, crashed.Failed(), fine.Name, fine.Failed())
	}
	if _, err := os.Stat(fine.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s's data dir after Prune: %v", fine.Name, err)
	}
	for _, n := range nodes {
		if _, err := os.Stat(filepath.Join(e.Dir, n.Name+".log")); err != nil {
			t.Fatalf("%s's log after Prune: %v", n.Name, err)
		}
	}
	if _, err := os.Stat(crashed.Dir); err != nil {
		t.Fatalf("the crashed node's data after Prune: %v", err)
	}
}
