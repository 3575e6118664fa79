package redsync_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rs "github.com/go-redsync/redsync/v4"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/backends/redsync"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// startNodes starts n independent Redis masters for one test or benchmark.
func startNodes(tb testing.TB, n int) ([]*compose.Node, []string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := redis.StartServers(ctx, composetest.ForTest(tb), compose.Spec{Nodes: n}, redis.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	addrs := make([]string, n)
	for i, nd := range nodes {
		addrs[i] = nd.Addr()
	}
	return nodes, addrs
}

func open(tb testing.TB, addrs []string, params map[string]string) locker.Locker {
	tb.Helper()
	return backendstest.Open(tb, "redsync", backends.Config{Addrs: addrs, Params: params})
}

// steal deletes key on every node, behind its holder's back.
func steal(addrs []string) func(testing.TB, string) {
	return func(t testing.TB, key string) {
		for _, a := range addrs {
			c := goredis.NewClient(&goredis.Options{Addr: a})
			err := c.Del(context.Background(), key).Err()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestConformance(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 25 s on a 2-core machine loaded about 10×
	_, addrs := startNodes(t, 5)
	for name, params := range map[string]map[string]string{
		"defaults": nil,
		// The setting people reach for to make redsync faster.
		"retrydelay=1ms": {"retrydelay": "1ms"},
	} {
		t.Run(name, func(t *testing.T) {
			locktest.Run(t, func(t testing.TB) locker.Locker { return open(t, addrs, params) },
				locktest.WithSteal(steal(addrs)))
		})
	}
}

// TestMajority: redsync grants with 2 of 5 nodes down, and with 3 down it
// refuses (ErrNotAcquired, naming the unreachable nodes) and Acquire
// returns when its ctx ends.
func TestMajority(t *testing.T) {
	nodes, addrs := startNodes(t, 5)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { noLeaks(t, ignore) }) // after the Locker's Close
	l := open(t, addrs, nil)
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, n := range nodes[:2] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := l.Acquire(ctx, "k", locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("Acquire with 2 of 5 nodes down: %v", err)
	}
	if err := lease.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend with 2 of 5 nodes down: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release with 2 of 5 nodes down: %v", err)
	}

	if err := nodes[2].Kill(); err != nil {
		t.Fatal(err)
	}
	_, err = l.TryAcquire(ctx, "k", locker.WithTTL(10*time.Second))
	if !errors.Is(err, locker.ErrNotAcquired) || !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("TryAcquire with 3 of 5 nodes down = %v, want ErrNotAcquired with node errors", err)
	}
	var re *rs.RedisError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), addrs[0]) {
		t.Fatalf("TryAcquire error %q does not keep redsync's RedisError or name the node %s", err, addrs[0])
	}
	t.Logf("3 of 5 down: %v", err)

	const wait = 2 * time.Second
	short, cancelShort := context.WithTimeout(ctx, wait)
	defer cancelShort()
	start := time.Now()
	_, err = l.Acquire(short, "k", locker.WithTTL(10*time.Second))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("Acquire with 3 of 5 nodes down = %v, want DeadlineExceeded after ErrNotAcquired", err)
	}
	if took > wait+time.Second {
		t.Fatalf("Acquire returned %v after a %v ctx", took, wait)
	}
}

// noLeaks fails t if goroutines that ignore does not cover are still
// running five seconds from now. The wait is go-redis's: after repeated
// failed dials its pool probes the dead node every second, and the prober
// notices that the client was closed only when it wakes up.
func noLeaks(t *testing.T, ignore goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := goleak.Find(ignore)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Error(err)
			return
		}
		<-tick.C
	}
}

// TestErrors: redsync's refusals keep redsync's error inside ours.
func TestErrors(t *testing.T) {
	_, addrs := startNodes(t, 3)
	a, b := open(t, addrs, nil), open(t, addrs, map[string]string{"tries": "2", "retrydelay": "1ms"})
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := a.Acquire(ctx, "k", locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, "k")
	var taken *rs.ErrTaken
	if !errors.Is(err, locker.ErrNotAcquired) || !errors.As(err, &taken) {
		t.Fatalf("TryAcquire of a held key = %v, want ErrNotAcquired wrapping *redsync.ErrTaken", err)
	}
	// With a retry strategy that stops, Acquire returns after one
	// LockContext (two tries here).
	_, err = b.Acquire(ctx, "k", locker.WithRetry(locker.NoRetry()))
	if !errors.Is(err, locker.ErrNotAcquired) || !errors.As(err, &taken) {
		t.Fatalf("Acquire with NoRetry of a held key = %v, want ErrNotAcquired wrapping *redsync.ErrTaken", err)
	}
	steal(addrs)(t, "k")
	err = lease.Release(ctx)
	if !errors.Is(err, locker.ErrNotHeld) || !errors.Is(err, rs.ErrLockAlreadyExpired) {
		t.Fatalf("Release of a stolen key = %v, want ErrNotHeld wrapping redsync.ErrLockAlreadyExpired", err)
	}
	if !errors.Is(lease.Err(), locker.ErrLost) {
		t.Fatalf("Err after a Release that found the key gone = %v, want ErrLost", lease.Err())
	}
}

func TestInfo(t *testing.T) {
	addrs := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"}
	l := open(t, addrs, nil)
	defer l.Close()
	info := l.Info()
	if info.Name != "redsync" || info.Quorum != 3 || info.Fencing || strings.Join(info.Nodes, ",") != strings.Join(addrs, ",") ||
		!strings.Contains(info.Guarantee, "no fencing token") {
		t.Fatalf("Info = %+v", info)
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	addr := []string{"127.0.0.1:1"}
	backendstest.RefusesBadConfigs(t, "redsync", []backendstest.BadConfig{
		{Name: "no address", Config: backends.Config{}, Want: "need at least 1"},
		{Name: "empty address", Config: backends.Config{Addrs: []string{"127.0.0.1:1", " "}}, Want: "is empty"},
		{Name: "unknown param", Config: backends.Config{Addrs: addr, Params: map[string]string{"retries": "3"}}, Want: "retries"},
		{Name: "bad tries", Config: backends.Config{Addrs: addr, Params: map[string]string{"tries": "many"}}, Want: `tries="many"`},
		{Name: "zero tries", Config: backends.Config{Addrs: addr, Params: map[string]string{"tries": "0"}}, Want: "tries=0"},
		{Name: "bad delay", Config: backends.Config{Addrs: addr, Params: map[string]string{"retrydelay": "1"}}, Want: `retrydelay="1"`},
		{Name: "zero delay", Config: backends.Config{Addrs: addr, Params: map[string]string{"retrydelay": "0s"}}, Want: "retrydelay=0s"},
		{Name: "bad drift", Config: backends.Config{Addrs: addr, Params: map[string]string{"drift": "lots"}}, Want: `drift="lots"`},
		{Name: "huge drift", Config: backends.Config{Addrs: addr, Params: map[string]string{"drift": "0.7"}}, Want: "drift=0.7"},
		{Name: "zero timeout", Config: backends.Config{Addrs: addr, Params: map[string]string{"timeoutfactor": "0"}}, Want: "timeoutfactor=0"},
		{Name: "timeout above 1", Config: backends.Config{Addrs: addr, Params: map[string]string{"timeoutfactor": "1.5"}}, Want: "timeoutfactor=1.5"},
	})
	if _, err := redsync.New(nil); !errors.Is(err, locker.ErrInvalid) {
		t.Fatalf("New(nil) = %v, want ErrInvalid", err)
	}
}
