package redlockbackend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/backends/redlock"
	_ "github.com/lockbench/lockbench/backends/redlockbackend"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
)

func TestOpenRejectsBadConfig(t *testing.T) {
	addrs := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	param := func(k, v string) backends.Config {
		return backends.Config{Addrs: addrs, Params: map[string]string{k: v}}
	}
	backendstest.RefusesBadConfigs(t, "redlock", []backendstest.BadConfig{
		{Name: "no address", Config: backends.Config{}, Want: "need at least 1"},
		{Name: "unknown param", Config: param("fencnig", "true"), Want: "fencnig"},
		{Name: "bad boolean", Config: param("quarantine", "maybe"), Want: `"maybe"`},
		{Name: "bad bootstrap", Config: param("bootstrap", "yes"), Want: `bootstrap="yes"`},
		{Name: "bad drift", Config: param("drift", "0.7"), Want: "0.7"},
		{Name: "bad max TTL", Config: param("maxttl", "0s"), Want: "0s"},
		{Name: "clock floor without fencing", Config: backends.Config{Addrs: addrs, Params: map[string]string{"fencing": "false", "clockfloor": "true"}}, Want: "WithFencing(false)"},
		{Name: "empty key prefix", Config: param("keyprefix", ""), Want: `key prefix ""`},
		{Name: "same node twice", Config: backends.Config{Addrs: []string{"127.0.0.1:1", "127.0.0.1:1"}}, Want: "given twice"},
	})
}

// TestBootstrapParam: on new nodes, bootstrap=true refuses them (they
// have just started: they may have restarted empty while a lock was
// held) and names force; bootstrap=force admits them for the Locker that
// asks and those opened after it, without the param; on nodes in use
// either admits nothing and opens all the same.
func TestBootstrapParam(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := redis.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 3}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := backends.Config{Params: map[string]string{"bootstrap": "true"}}
	for _, n := range nodes {
		cfg.Addrs = append(cfg.Addrs, n.Addr())
	}
	if l, err := backends.Open("redlock", cfg); err == nil {
		l.Close()
		t.Fatal("bootstrap=true admitted nodes that have just started")
	} else if !errors.Is(err, redlock.ErrMaybeInUse) || !strings.Contains(err.Error(), "force") {
		t.Fatalf("bootstrap=true on new nodes = %v, want ErrMaybeInUse naming force", err)
	}
	for i, mode := range []string{"force", "force", "true"} { // the second and third find the nodes in use
		cfg.Params["bootstrap"] = mode
		l := backendstest.OpenClosed(t, "redlock", cfg)
		lease, err := l.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatalf("open %d with bootstrap=%s: %v", i, mode, err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	delete(cfg.Params, "bootstrap")
	l := backendstest.OpenClosed(t, "redlock", cfg)
	if _, err := l.TryAcquire(ctx, "k"); err != nil {
		t.Fatalf("a client without the param on admitted nodes: %v", err)
	}
	if info := l.Info(); info.Name != "redlock" || info.Quorum != 2 || !info.Fencing {
		t.Fatalf("Info = %+v, want redlock, quorum 2 of 3, fencing on by default", info)
	}
}
