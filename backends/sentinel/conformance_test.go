package sentinel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/backends/sentinel"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	sentinelkind "github.com/lockbench/lockbench/kinds/sentinel"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// startSet starts a master–replica set with its sentinels for one test.
func startSet(tb testing.TB, s compose.Spec, o sentinelkind.Options) *sentinelkind.Set {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set, err := sentinelkind.StartSet(ctx, composetest.ForTest(tb), s, o)
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

// open opens the registered backend on s with params; the caller closes it.
func open(tb testing.TB, s *sentinelkind.Set, params map[string]string) locker.Locker {
	tb.Helper()
	return backendstest.Open(tb, "sentinel", backends.Config{Addrs: s.SentinelAddrs(), Params: params})
}

// openT is open with a Close at the end of the test.
func openT(t *testing.T, s *sentinelkind.Set, params map[string]string) locker.Locker {
	t.Helper()
	return backendstest.OpenClosed(t, "sentinel", backends.Config{Addrs: s.SentinelAddrs(), Params: params})
}

// direct returns a plain client to addr, closed at the end of the test.
func direct(t testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// stealOnMaster deletes key on the current master, behind its holder's back.
func stealOnMaster(s *sentinelkind.Set) func(testing.TB, string) {
	return func(t testing.TB, key string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := s.CurrentMaster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(&goredis.Options{Addr: m})
		defer c.Close()
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConformance(t *testing.T) {
	s := startSet(t, compose.Spec{}, sentinelkind.Options{})
	for _, params := range []map[string]string{
		{"wait": "0"}, // and the default master name, which is compose's
		{"wait": "1", "waittimeout": "100ms", "master": s.MasterName},
	} {
		t.Run("wait="+params["wait"], func(t *testing.T) {
			locktest.Run(t, func(t testing.TB) locker.Locker { return open(t, s, params) },
				locktest.WithSteal(stealOnMaster(s)))
		})
	}
}

func TestInfo(t *testing.T) {
	addrs := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	for _, tt := range []struct {
		params  map[string]string
		fencing bool
		says    string
	}{
		{nil, true, "asynchronously"},
		{map[string]string{"fencing": "false"}, false, "asynchronously"},
		{map[string]string{"wait": "2", "waittimeout": "50ms"}, true, "WAITs up to 50ms for 2 replica(s)"},
	} {
		l, err := backends.Open("sentinel", backends.Config{Addrs: addrs, Params: tt.params})
		if err != nil {
			t.Fatal(err)
		}
		info := l.Info()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if info.Name != "sentinel" || info.Quorum != 1 || info.Fencing != tt.fencing || strings.Join(info.Nodes, ",") != strings.Join(addrs, ",") {
			t.Errorf("params %v: Info = %+v", tt.params, info)
		}
		if !strings.Contains(info.Guarantee, tt.says) {
			t.Errorf("params %v: Guarantee %q does not say %q", tt.params, info.Guarantee, tt.says)
		}
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	addr := []string{"127.0.0.1:1"}
	backendstest.RefusesBadConfigs(t, "sentinel", []backendstest.BadConfig{
		{Name: "no address", Config: backends.Config{}, Want: "need at least 1"},
		{Name: "empty address", Config: backends.Config{Addrs: []string{""}}, Want: "is empty"},
		{Name: "unknown param", Config: backends.Config{Addrs: addr, Params: map[string]string{"wiat": "1"}}, Want: "wiat"},
		{Name: "empty master", Config: backends.Config{Addrs: addr, Params: map[string]string{"master": " "}}, Want: `master=" "`},
		{Name: "bad fencing", Config: backends.Config{Addrs: addr, Params: map[string]string{"fencing": "maybe"}}, Want: `fencing="maybe"`},
		{Name: "bad wait", Config: backends.Config{Addrs: addr, Params: map[string]string{"wait": "one"}}, Want: `wait="one"`},
		{Name: "negative wait", Config: backends.Config{Addrs: addr, Params: map[string]string{"wait": "-1"}}, Want: "-1 replicas"},
		{Name: "bad wait timeout", Config: backends.Config{Addrs: addr, Params: map[string]string{"waittimeout": "soon"}}, Want: `waittimeout="soon"`},
		{Name: "zero wait timeout", Config: backends.Config{Addrs: addr, Params: map[string]string{"wait": "1", "waittimeout": "0s"}}, Want: "wait timeout 0s"},
		{Name: "sub-ms timeout", Config: backends.Config{Addrs: addr, Params: map[string]string{"wait": "1", "waittimeout": "500us"}}, Want: "wait timeout 500µs"},
		{Name: "bad node timeout", Config: backends.Config{Addrs: addr, Params: map[string]string{"nodetimeout": "-1s"}}, Want: "node timeout -1s"},
	})
	for name, fo := range map[string]goredis.FailoverOptions{
		"no master name":   {SentinelAddrs: addr},
		"no sentinels":     {MasterName: "m"},
		"replica routing":  {MasterName: "m", SentinelAddrs: addr, ReplicaOnly: true},
		"empty a sentinel": {MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1", ""}},
	} {
		t.Run(name, func(t *testing.T) {
			if l, err := sentinel.New(fo); !errors.Is(err, locker.ErrInvalid) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("New(%+v) = %v, want ErrInvalid", fo, err)
			}
		})
	}
}
