package compose_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// cutProven cuts placed node n off from its clients, proves the cut
// from their hosts, and heals it.
func cutProven(t *testing.T, ctx context.Context, n *compose.Node) {
	t.Helper()
	if err := n.CutClients(); err != nil {
		t.Fatal(err)
	}
	if err := n.Unreachable(ctx, 2*time.Second); err != nil {
		t.Errorf("after the cut: %v", err)
	}
	if err := n.HealClients(); err != nil {
		t.Fatal(err)
	}
}

// TestPlaced runs servers on simulated hosts through the same Node
// controls as on this machine: a Redis node on host1 and a PostgreSQL
// server (as its own account) on host2, whose clients run on host3. Each
// is reached from here, paused (every thread stopped, silent), restarted
// with and without its data, cut off from host3 (proven from host3, while
// the control node still reaches it) and healed, and has its clock jumped
// (read back from the server); a Sentinel set spans the three hosts
// (placedSentinel: a failover that loses a held-back write, a client
// cut); Close leaves no process, no cut and no file on any host.
func TestPlaced(t *testing.T) {
	composetest.StartsServersWithin(t, 4*time.Minute)
	lab := remotetest.New(t, 3)
	ctx := composetest.Context(t)
	hosts := []*remote.SSH{lab.Dial(t, 0, "root"), lab.Dial(t, 1, "root"), lab.Dial(t, 2, "root")}
	if remotetest.SudoAvailable() {
		hosts[1] = lab.Dial(t, 1, remotetest.Sudoer) // PostgreSQL's host through sudo
	}
	clients := []compose.Peer{{Host: hosts[2], Addr: lab.Hosts[2].Addr}}
	env := composetest.ForTest(t)
	redisNodes, err := redis.StartServers(ctx, env, compose.Spec{Nodes: 1, FakeClock: true, Durability: compose.DurabilityDurable, On: []compose.Placement{{
		Host: hosts[0], Addr: lab.Hosts[0].Addr, Port: 6379, Dir: "/tmp/lockbench/redis", Clients: clients,
	}}}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pgBin, err := postgres.Binary()
	if err != nil {
		t.Skip(err)
	}
	pg, err := postgres.StartServer(ctx, env, compose.Spec{FakeClock: true, On: []compose.Placement{{
		Host: hosts[1], Addr: lab.Hosts[1].Addr, Port: 5432, Dir: "/tmp/lockbench/postgres", Binary: pgBin, Clients: clients,
	}}}, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	user, err := remote.Output(ctx, hosts[1], "stat", "-c", "%U", "/proc/"+strconv.Itoa(pg.PID()))
	if err != nil || strings.TrimSpace(string(user)) != postgres.DefaultPrograms().User {
		t.Errorf("the placed PostgreSQL server runs as %q (%v), want %s", user, err, postgres.DefaultPrograms().User)
	}
	for _, n := range []*compose.Node{redisNodes[0], pg} {
		t.Run(n.Name, func(t *testing.T) {
			if n.Host().Name() != lab.Hosts[0].Name && n.Host().Name() != lab.Hosts[1].Name {
				t.Fatalf("%s runs on %s", n.Name, n.Host().Name())
			}
			if err := n.Pause(); err != nil {
				t.Fatal(err)
			}
			qctx, qcancel := context.WithTimeout(ctx, time.Second)
			if _, err := n.ServerTime(qctx); err == nil {
				t.Error("a paused server answered")
			}
			qcancel()
			if err := n.Resume(); err != nil {
				t.Fatal(err)
			}
			before, err := n.ServerTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.JumpClock(time.Hour); err != nil {
				t.Fatal(err)
			}
			after, err := n.ServerTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if jumped := after.Sub(before); (jumped - time.Hour).Abs() > 30*time.Second {
				t.Errorf("the server's clock moved by %v after a jump of 1h", jumped)
			}
			pid := n.PID()
			if err := n.Restart(ctx, true); err != nil {
				t.Fatal(err)
			}
			if n.PID() == pid || n.PID() == 0 {
				t.Errorf("pid %d before the restart, %d after", pid, n.PID())
			}
			if off := n.ClockOffset(); (off - time.Hour).Abs() > time.Second {
				t.Errorf("the clock's offset after a restart: %v", off)
			}
			if err := n.Restart(ctx, false); err != nil {
				t.Fatal(err)
			}
			cutProven(t, ctx, n)
			if err := n.Unreachable(ctx, 2*time.Second); err == nil {
				t.Error("still unreachable from the client host after the heal")
			}
			if n.ClientsCut() {
				t.Error("ClientsCut after the heal")
			}
		})
	}
	t.Run("sentinel", func(t *testing.T) { placedSentinel(t, ctx, env, lab, hosts, clients) })
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if kept, err := env.Prune(); err != nil || len(kept) > 0 {
		t.Errorf("prune: kept %v (%v)", kept, err)
	}
	for i, h := range hosts {
		if left, err := remotetest.Leftovers(ctx, h); err != nil || len(left) > 0 {
			t.Errorf("%s: left %v (%v)", lab.Hosts[i].Name, left, err)
		}
	}
	for i, h := range hosts {
		for _, d := range []string{"/tmp/lockbench/redis", "/tmp/lockbench/redis.clock", "/tmp/lockbench/sentinel-redis", "/tmp/lockbench/sentinel-redis.clock", "/tmp/lockbench/sentinel"} {
			if _, err := remote.Output(ctx, h, "test", "!", "-e", d); err != nil {
				t.Errorf("%s left on %s", d, lab.Hosts[i].Name)
			}
		}
	}
}
