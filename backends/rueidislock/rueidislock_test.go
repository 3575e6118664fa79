package rueidislock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/backends/rueidislock"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// nodes are five independent Redis masters that the tests and the
// benchmarks share: rueidislock and our redis backend use the first, our
// Redlock all five.
var nodes = composetest.NewShared(func(ctx context.Context, e *compose.Env) ([]string, error) {
	ns, err := redis.StartServers(ctx, e, compose.Spec{Nodes: 5}, redis.Options{})
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ns))
	for i, n := range ns {
		addrs[i] = n.Addr()
	}
	return addrs, nil
})

func TestMain(m *testing.M) { os.Exit(composetest.RunTests(m, nodes)) }

func open(tb testing.TB, addr string, params map[string]string) locker.Locker {
	tb.Helper()
	return backendstest.Open(tb, "rueidislock", backends.Config{Addrs: []string{addr}, Params: params})
}

// steal deletes, behind its holder's back, enough of the keys of a
// rueidislock lock (named as rueidislock names them: prefix:i:name) that
// its holder no longer holds a majority.
func steal(tb testing.TB, addr, key string, majority int) {
	tb.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	for i := range majority {
		if err := c.Del(context.Background(), fmt.Sprintf("rueidislock:%d:%s", i, key)).Err(); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestConformance runs the suite on one server, with one key (our
// default) and with 2 of 3 keys (rueidislock's default). There is no
// locktest.WithSteal: a stolen key ends the lease through rueidislock's
// client-side caching, asynchronously, and Extend does not ask the server,
// so an Extend right after the theft may still succeed — TestStolen
// checks the loss instead.
func TestConformance(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 23 s on a 2-core machine loaded about 10×
	addr := nodes.Get(t)[0]
	for _, m := range []string{"1", "2"} {
		t.Run("majority="+m, func(t *testing.T) {
			locktest.Run(t, func(t testing.TB) locker.Locker { return open(t, addr, map[string]string{"majority": m}) })
		})
	}
}

// TestStolen: when a majority of its keys are deleted behind its back,
// the holder learns it from Redis's invalidation and its lease ends with
// ErrLost, without any request of its own.
func TestStolen(t *testing.T) {
	addr := nodes.Get(t)[0]
	for _, m := range []int{1, 2} {
		t.Run(fmt.Sprintf("majority=%d", m), func(t *testing.T) {
			l := open(t, addr, map[string]string{"majority": fmt.Sprint(m)})
			defer l.Close()
			key := fmt.Sprintf("stolen:%d:%d", m, time.Now().UnixNano())
			lease := locktest.MustAcquire(t, l, key, locker.WithTTL(time.Second))
			start := time.Now()
			steal(t, addr, key, m)
			err := locktest.WaitDone(t, lease, 5*time.Second)
			t.Logf("lease ended %v after the theft: %v", time.Since(start).Round(time.Microsecond), err)
			if !errors.Is(err, locker.ErrLost) {
				t.Fatalf("Err = %v, want ErrLost", err)
			}
			if err := lease.Extend(context.Background(), time.Second); !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("Extend of a stolen lease = %v, want ErrNotHeld", err)
			}
		})
	}
}

// TestHorizon: a lease's validity is capped at the horizon, whatever its
// TTL or extension asks for, and the keys outlive it on the server.
func TestHorizon(t *testing.T) {
	addr := nodes.Get(t)[0]
	l := open(t, addr, map[string]string{"validity": "3s", "extendinterval": "1s"})
	defer l.Close()
	h := l.(*rueidislock.Locker).Horizon()
	if h != 1600*time.Millisecond {
		t.Fatalf("horizon %v with a 3s validity extended every 1s, want (3s−1s)·4/5 = 1.6s", h)
	}
	key := fmt.Sprintf("horizon:%d", time.Now().UnixNano())
	start := time.Now()
	lease := locktest.MustAcquire(t, l, key, locker.WithTTL(time.Hour))
	if until := lease.ValidUntil().Sub(start); until > h+time.Second {
		t.Fatalf("ValidUntil %v after the grant for a TTL of 1h, want at most the horizon %v", until, h)
	}
	if err := lease.Extend(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	pttl, err := c.PTTL(context.Background(), "rueidislock:0:"+key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(lease.ValidUntil()); pttl < left {
		t.Fatalf("the key expires in %v on the server, before the lease's ValidUntil in %v", pttl, left)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(context.Background(), "rueidislock:0:"+key).Result(); n != 0 {
		t.Fatal("Release left the key on the server")
	}
}

// TestFiveIndependentNodes: rueidis cannot make one client of the five
// independent masters our Redlock runs on (it takes several addresses
// only for a Redis Cluster), so neither can rueidislock, whose keys all go
// through one client; the backend refuses them with the reason.
func TestFiveIndependentNodes(t *testing.T) {
	addrs := nodes.Get(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err == nil {
		c.Close()
		t.Fatal("rueidis made one client of five independent masters")
	}
	t.Logf("rueidis.NewClient on the five Redlock nodes: %v", err)
	_, err = backends.Open("rueidislock", backends.Config{Addrs: addrs})
	if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "one Redis server") {
		t.Fatalf("Open on five masters = %v, want ErrInvalid saying why", err)
	}
}

// TestContendedWaitsEnd: 16 Lockers (separate processes' worth) take
// turns at one key. rueidislock alone loses a waiter's wake-up now and
// then (see the package doc) and that waiter waits forever; with the
// rewait bound every acquisition completes. It logs how many waits were
// cut: each is a lost wake-up or a wait longer than the bound.
func TestContendedWaitsEnd(t *testing.T) {
	addr := nodes.Get(t)[0]
	lockers := make([]locker.Locker, 16)
	for i := range lockers {
		lockers[i] = open(t, addr, nil)
		defer lockers[i].Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	total := 0
	for round := range 3 {
		r, err := locktest.Exclusion(ctx, lockers, fmt.Sprintf("contended:%d:%d", round, time.Now().UnixNano()), 16, 20)
		if err != nil {
			t.Fatalf("round %d, after %d sections: %v", round, r.Sections, err)
		}
		if r.Overlaps != 0 {
			t.Fatalf("round %d: %d overlaps", round, r.Overlaps)
		}
		total += r.Sections
	}
	var cut int64
	for _, l := range lockers {
		cut += l.(*rueidislock.Locker).Rewaits()
	}
	t.Logf("%d acquisitions, %d waits cut after 1s", total, cut)
}

func TestInfo(t *testing.T) {
	addr := nodes.Get(t)[0]
	l := open(t, addr, map[string]string{"majority": "2"})
	defer l.Close()
	info := l.Info()
	if info.Name != "rueidislock" || info.Quorum != 1 || info.Fencing || len(info.Nodes) != 1 || info.Nodes[0] != addr ||
		!strings.Contains(info.Guarantee, "2 of 3 keys") || !strings.Contains(info.Guarantee, "no fencing token") {
		t.Fatalf("Info = %+v", info)
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	addr := []string{"127.0.0.1:1"}
	p := func(k, v string) map[string]string { return map[string]string{k: v} }
	backendstest.RefusesBadConfigs(t, "rueidislock", []backendstest.BadConfig{
		{Name: "no address", Config: backends.Config{}, Want: "need at least 1"},
		{Name: "empty address", Config: backends.Config{Addrs: []string{""}}, Want: "empty"},
		{Name: "two addresses", Config: backends.Config{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}, Want: "one Redis server"},
		{Name: "unknown param", Config: backends.Config{Addrs: addr, Params: p("quorum", "3")}, Want: "quorum"},
		{Name: "bad majority", Config: backends.Config{Addrs: addr, Params: p("majority", "most")}, Want: `majority="most"`},
		{Name: "zero majority", Config: backends.Config{Addrs: addr, Params: p("majority", "0")}, Want: "majority=0"},
		{Name: "bad validity", Config: backends.Config{Addrs: addr, Params: p("validity", "5")}, Want: `validity="5"`},
		{Name: "tiny validity", Config: backends.Config{Addrs: addr, Params: p("validity", "1ms")}, Want: "validity=1ms"},
		{Name: "interval past validity", Config: backends.Config{Addrs: addr, Params: map[string]string{"validity": "1s", "extendinterval": "2s"}}, Want: "extendinterval=2s"},
		{Name: "negative try", Config: backends.Config{Addrs: addr, Params: p("trynextafter", "-1ms")}, Want: "trynextafter=-1ms"},
		{Name: "negative rewait", Config: backends.Config{Addrs: addr, Params: p("rewait", "-1s")}, Want: "rewait=-1s"},
	})
}
