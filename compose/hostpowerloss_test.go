package compose_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	rediskind "github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// TestPlacedPowerLoss cuts the power of a Redis node placed on a simulated
// host, its dir on a lazy filesystem served there by a lazyfs daemon (this
// test binary, uploaded, plays the lockbench binary): a key written just
// before is lost without persistence (fast), lost when the server wrote it
// to its AOF and never fsynced it (a Kill would keep it: the page cache
// has it), and kept under appendfsync always (durable). Close leaves no
// process and no mount on the host, and Prune no file.
func TestPlacedPowerLoss(t *testing.T) {
	composetest.StartsServersWithin(t, 3*time.Minute)
	composetest.NeedsLazyFS(t)
	lab := remotetest.New(t, 1)
	ctx := composetest.Context(t)
	host := lab.Dial(t, 0, "root")
	const bin = "/tmp/lockbench-bin/lockbench"
	uploadSelf(t, ctx, host, bin)
	for _, tc := range []struct {
		name       string
		durability compose.Durability
		config     [][]string
		kept       bool
		dropped    bool // the power loss dropped unsynced bytes
	}{
		{name: "fast", durability: compose.DurabilityFast},
		{name: "aof-never-fsynced", durability: compose.DurabilityFast, config: [][]string{{"appendonly", "yes"}, {"appendfsync", "no"}}, dropped: true},
		{name: "durable", durability: compose.DurabilityDurable, kept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := composetest.ForTest(t)
			dir := "/tmp/lockbench/" + tc.name
			nodes, err := rediskind.StartServers(ctx, env, compose.Spec{Nodes: 1, Durability: tc.durability, LazyFS: true, On: []compose.Placement{{
				Host: host, Addr: lab.Hosts[0].Addr, Port: 6379, Dir: dir, Lockbench: bin,
			}}}, rediskind.Options{Config: tc.config})
			if err != nil {
				t.Fatal(err)
			}
			n := nodes[0]
			if !n.HasLazyFS() {
				t.Fatal("a node started with LazyFS has none")
			}
			c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
			defer c.Close()
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			lost, err := n.PowerLoss()
			if err != nil {
				t.Fatal(err)
			}
			if tc.dropped && lost.Bytes == 0 {
				t.Errorf("the power loss dropped %+v: want the AOF's unsynced page", lost)
			}
			if tc.kept && lost.Bytes != 0 {
				t.Errorf("the power loss dropped %+v under appendfsync always", lost)
			}
			if n.Running() {
				t.Error("the node runs after its power loss")
			}
			if err := n.Start(ctx); err != nil {
				t.Fatal(err)
			}
			v, err := c.Get(ctx, "k").Result()
			switch {
			case tc.kept && err != nil:
				t.Errorf("after the power loss the key is gone (%v): appendfsync always synced it", err)
			case !tc.kept && !errors.Is(err, redis.Nil):
				t.Errorf("after the power loss the key reads %q (%v): want it lost", v, err)
			}
			if err := env.Close(); err != nil {
				t.Fatal(err)
			}
			mounts, err := remote.Output(ctx, host, "cat", "/proc/self/mountinfo")
			if err != nil || strings.Contains(string(mounts), "lockbench-lazyfs") {
				t.Errorf("a lazy filesystem is left mounted (%v):\n%s", err, mounts)
			}
			if kept, err := env.Prune(); err != nil || len(kept) > 0 {
				t.Errorf("prune: kept %v (%v)", kept, err)
			}
			if left, err := remotetest.Leftovers(ctx, host, "/tmp/lockbench"); err != nil || len(left) > 0 {
				t.Errorf("left on the host: %v (%v)", left, err)
			}
		})
	}
}
