package sentinel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/sentinel"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// startSet starts a master–replica set with its sentinels for one test.
func startSet(tb testing.TB, o compose.SentinelOptions) *compose.SentinelSet {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := compose.ForTest(tb).Sentinel(ctx, o)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// open opens the registered backend on s with params; the caller closes it.
func open(tb testing.TB, s *compose.SentinelSet, params map[string]string) locker.Locker {
	tb.Helper()
	l, err := backends.Open("sentinel", backends.Config{Addrs: s.SentinelAddrs(), Params: params})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// openT is open with a Close at the end of the test.
func openT(t *testing.T, s *compose.SentinelSet, params map[string]string) locker.Locker {
	t.Helper()
	l := open(t, s, params)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// direct returns a plain client to addr, closed at the end of the test.
func direct(t testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// stealOnMaster deletes key on the current master, behind its holder's back.
func stealOnMaster(s *compose.SentinelSet) func(testing.TB, string) {
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
	s := startSet(t, compose.SentinelOptions{})
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
	for name, tt := range map[string]struct {
		cfg  backends.Config
		want string // the error must name the bad value
	}{
		"no address":        {backends.Config{}, "need at least 1"},
		"empty address":     {backends.Config{Addrs: []string{""}}, "is empty"},
		"unknown param":     {backends.Config{Addrs: addr, Params: map[string]string{"wiat": "1"}}, "wiat"},
		"empty master":      {backends.Config{Addrs: addr, Params: map[string]string{"master": " "}}, `master=" "`},
		"bad fencing":       {backends.Config{Addrs: addr, Params: map[string]string{"fencing": "maybe"}}, `fencing="maybe"`},
		"bad wait":          {backends.Config{Addrs: addr, Params: map[string]string{"wait": "one"}}, `wait="one"`},
		"negative wait":     {backends.Config{Addrs: addr, Params: map[string]string{"wait": "-1"}}, "-1 replicas"},
		"bad wait timeout":  {backends.Config{Addrs: addr, Params: map[string]string{"waittimeout": "soon"}}, `waittimeout="soon"`},
		"zero wait timeout": {backends.Config{Addrs: addr, Params: map[string]string{"wait": "1", "waittimeout": "0s"}}, "wait timeout 0s"},
		"sub-ms timeout":    {backends.Config{Addrs: addr, Params: map[string]string{"wait": "1", "waittimeout": "500us"}}, "wait timeout 500µs"},
		"bad node timeout":  {backends.Config{Addrs: addr, Params: map[string]string{"nodetimeout": "-1s"}}, "node timeout -1s"},
	} {
		t.Run(name, func(t *testing.T) {
			l, err := backends.Open("sentinel", tt.cfg)
			if err == nil {
				l.Close()
				t.Fatalf("Open(%+v) succeeded", tt.cfg)
			}
			if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open(%+v) = %v, want ErrInvalid mentioning %q", tt.cfg, err, tt.want)
			}
		})
	}
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
