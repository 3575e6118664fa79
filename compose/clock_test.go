package compose_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
	rediskind "github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/kinds/zookeeper"
)

// clockSlack bounds how far a server's clock reading may be from what a
// jump predicts: the reading and our clock are taken a round trip apart,
// on a loaded machine.
const clockSlack = 2 * time.Second

// near reports whether got is within clockSlack of want.
func near(got, want time.Duration) bool { return (got - want).Abs() <= clockSlack }

// serverClock reads a server's wall clock, for the table below.
type serverClock func(ctx context.Context) (time.Time, error)

// offsetOf returns how far the server's clock is ahead of ours: its
// reading against the middle of the round trip.
func offsetOf(ctx context.Context, read serverClock) (time.Duration, error) {
	before := time.Now()
	t, err := read(ctx)
	if err != nil {
		return 0, err
	}
	mid := before.Add(time.Since(before) / 2)
	return t.Sub(mid), nil
}

// TestFakeClock jumps the wall clock of real servers run under the clock
// preload and reads it back from each with ServerTime: Redis's TIME,
// PostgreSQL's clock_timestamp() and the mtime ZooKeeper stamps on a
// znode (the JVM's System.currentTimeMillis). It checks that jumps add up,
// that a rate scales the clock, that a restart keeps the clock, and that
// ResetClock brings it back.
func TestFakeClock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, ctx context.Context) *compose.Node
	}{
		{"redis", func(t *testing.T, ctx context.Context) *compose.Node {
			ns, err := rediskind.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 1, FakeClock: true}, rediskind.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return ns[0]
		}},
		{"postgres", func(t *testing.T, ctx context.Context) *compose.Node {
			n, err := postgres.StartServer(ctx, composetest.ForTest(t), compose.Spec{FakeClock: true}, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return n
		}},
		{"zookeeper", func(t *testing.T, ctx context.Context) *compose.Node {
			z, err := zookeeper.StartEnsemble(ctx, composetest.ForTest(t), compose.Spec{Nodes: 1, FakeClock: true}, zookeeper.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return z.Nodes[0]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			n := tc.start(t, ctx)
			read := n.ServerTime
			check := func(when string, want time.Duration) {
				t.Helper()
				got, err := offsetOf(ctx, read)
				if err != nil {
					t.Fatalf("%s: read the clock: %v", when, err)
				}
				if !near(got, want) {
					t.Fatalf("%s: the server's clock is %v ahead; want %v", when, got, want)
				}
				if !near(n.ClockOffset(), want) {
					t.Fatalf("%s: ClockOffset %v; want %v", when, n.ClockOffset(), want)
				}
			}
			check("at start", 0)
			for _, j := range []struct {
				by, total time.Duration
			}{{2 * time.Minute, 2 * time.Minute}, {-5 * time.Minute, -3 * time.Minute}, {3 * time.Minute, 0}} {
				if err := n.JumpClock(j.by); err != nil {
					t.Fatal(err)
				}
				check("after a jump by "+j.by.String(), j.total)
			}
			if err := n.JumpClock(time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := n.Restart(ctx, true); err != nil {
				t.Fatal(err)
			}
			check("after a restart", time.Hour)
			// At rate 20 the clock gains 19 s per real second.
			if err := n.SetClockRate(20); err != nil {
				t.Fatal(err)
			}
			before, err := offsetOf(ctx, read)
			if err != nil {
				t.Fatal(err)
			}
			real := time.Now()
			time.Sleep(time.Second) // the time that the clock scales
			after, err := offsetOf(ctx, read)
			if err != nil {
				t.Fatal(err)
			}
			gained, elapsed := after-before, time.Since(real)
			if rate := 1 + gained.Seconds()/elapsed.Seconds(); math.Abs(rate-20) > 3 {
				t.Fatalf("at rate 20 the clock gained %v in %v: rate %.1f", gained, elapsed, rate)
			}
			if err := n.ResetClock(); err != nil {
				t.Fatal(err)
			}
			check("after ResetClock", 0)
		})
	}
}

// TestRedisClockJumpExpiresKeys checks what a wall-clock jump does to
// Redis's keys: a jump forward past a key's TTL expires it at once, a
// longer TTL loses the jump, and a jump back gives the time back.
func TestRedisClockJumpExpiresKeys(t *testing.T) {
	ctx := context.Background()
	ns, err := rediskind.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 1, FakeClock: true}, rediskind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, c := ns[0], composetest.RedisClient(t, ns[0].Addr(), 300*time.Millisecond)
	if err := c.Set(ctx, "minute", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "hour", "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.JumpClock(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "minute").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET of a 1 min key after a +2 min jump: %v; want it expired", err)
	}
	if ttl := c.PTTL(ctx, "hour").Val(); !near(ttl, 58*time.Minute) {
		t.Fatalf("PTTL of a 1 h key after a +2 min jump: %v; want about 58m", ttl)
	}
	if err := n.JumpClock(-2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, "hour").Val(); !near(ttl, time.Hour) {
		t.Fatalf("PTTL of a 1 h key after jumping back: %v; want about 1h", ttl)
	}
}

// TestFakeClockNeedsTheOption checks that the clock controls refuse a
// node started without FakeClock, saying why an etcd member cannot have
// one.
func TestFakeClockNeedsTheOption(t *testing.T) {
	ctx := context.Background()
	ns, err := rediskind.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 1}, rediskind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"JumpClock":    func() error { return ns[0].JumpClock(time.Second) },
		"SetClockRate": func() error { return ns[0].SetClockRate(2) },
		"ResetClock":   ns[0].ResetClock,
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "FakeClock") {
			t.Errorf("%s on a node without FakeClock: %v; want an error naming FakeClock", name, err)
		}
	}
}

// TestClockRateRejectsBadRates checks SetClockRate's input.
func TestClockRateRejectsBadRates(t *testing.T) {
	ctx := context.Background()
	ns, err := rediskind.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 1, FakeClock: true}, rediskind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if err := ns[0].SetClockRate(r); err == nil {
			t.Errorf("SetClockRate(%v) = nil; want an error", r)
		}
	}
}

// BenchmarkFakeClock measures what the clock preload costs a server: one
// client's GETs and SETs on a Redis node without and with it, in the same
// run (Redis reads the clock several times per command).
func BenchmarkFakeClock(b *testing.B) {
	for _, fake := range []bool{false, true} {
		b.Run("redis/fakeclock="+map[bool]string{false: "false", true: "true"}[fake], func(b *testing.B) {
			ns, err := rediskind.StartServers(context.Background(), composetest.ForTest(b), compose.Spec{Nodes: 1, FakeClock: fake}, rediskind.Options{})
			if err != nil {
				b.Fatal(err)
			}
			benchRedisSet(b, ns[0])
		})
	}
	for _, fake := range []bool{false, true} {
		b.Run("postgres/fakeclock="+map[bool]string{false: "false", true: "true"}[fake], func(b *testing.B) {
			ctx := context.Background()
			s := compose.Spec{Durability: compose.DurabilityFast, FakeClock: fake}
			n, err := postgres.StartServer(ctx, composetest.ForTest(b), s, postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			c := pgConnect(b, ctx, n.Addr())
			for b.Loop() {
				if _, err := c.Exec(ctx, "select now()"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestZooKeeperStampsWithTheLeadersClock checks whose wall clock a
// ZooKeeper ensemble reads: the leader's, which stamps every transaction.
// A follower's jump shows nowhere, even in a znode written through it; the
// leader's shows in every znode.
func TestZooKeeperStampsWithTheLeadersClock(t *testing.T) {
	ctx := context.Background()
	z, err := zookeeper.StartEnsemble(ctx, composetest.ForTest(t), compose.Spec{Nodes: 3, FakeClock: true}, zookeeper.Options{})
	if err != nil {
		t.Fatal(err)
	}
	leader, err := z.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var follower *compose.Node
	for _, n := range z.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	if err := follower.JumpClock(time.Hour); err != nil {
		t.Fatal(err)
	}
	if off, err := offsetOf(ctx, follower.ServerTime); err != nil || !near(off, 0) {
		t.Fatalf("a znode written through a follower whose clock jumped an hour: %v ahead (%v); want the leader's time", off, err)
	}
	if err := leader.JumpClock(-time.Hour); err != nil {
		t.Fatal(err)
	}
	if off, err := offsetOf(ctx, follower.ServerTime); err != nil || !near(off, -time.Hour) {
		t.Fatalf("a znode written through a follower after the leader's clock jumped back an hour: %v ahead (%v); want -1h", off, err)
	}
}
