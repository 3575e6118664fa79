package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	rediskind "github.com/lockbench/lockbench/kinds/redis"
)

func TestRedisKillRestart(t *testing.T) {
	ctx := context.Background()
	env := composetest.ForTest(t)
	nodes, err := rediskind.StartServers(ctx, env, compose.Spec{Nodes: 2, Durability: compose.DurabilityDurable}, rediskind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if nodes[0].Addr() == nodes[1].Addr() || nodes[0].Name == nodes[1].Name {
		t.Fatalf("two nodes share an address or a name: %s %s", nodes[0].Addr(), nodes[0].Name)
	}
	n := nodes[0]
	c := composetest.RedisClient(t, n.Addr(), 300*time.Millisecond)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	pid := n.PID()
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() || composetest.ProcessAlive(pid) {
		t.Fatalf("process %d still alive after Kill", pid)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered by a killed node")
	}

	if err := n.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after a restart with data (AOF): GET k = %q, %v; want v", v, err)
	}

	if err := n.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("after a restart without data: GET k = %v; want redis.Nil", err)
	}
	if v, err := composetest.RedisClient(t, nodes[1].Addr(), 300*time.Millisecond).Ping(ctx).Result(); err != nil || v != "PONG" {
		t.Fatalf("the other node was disturbed: %v %v", v, err)
	}
}

func TestRedisPauseResume(t *testing.T) {
	ctx := context.Background()
	env := composetest.ForTest(t)
	nodes, err := rediskind.StartServers(ctx, env, compose.Spec{Nodes: 1}, rediskind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := nodes[0]
	c := composetest.RedisClient(t, n.Addr(), 300*time.Millisecond)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	if !n.Paused() || !n.Running() {
		t.Fatal("a paused node should report Paused and Running")
	}
	err = c.Ping(ctx).Err()
	var netErr interface{ Timeout() bool }
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("PING to a paused node = %v, want a timeout", err)
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}
