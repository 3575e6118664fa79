package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

func TestOpenRejectsBadConfig(t *testing.T) {
	addr := []string{"127.0.0.1:1"}
	p := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	backendstest.RefusesBadConfigs(t, "postgres", []backendstest.BadConfig{
		{Name: "no address", Config: backends.Config{}, Want: "need at least 1"},
		{Name: "two addresses", Config: backends.Config{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}, Want: `"127.0.0.1:2"`},
		{Name: "empty address", Config: backends.Config{Addrs: []string{" "}}, Want: "empty"},
		{Name: "bad URL", Config: backends.Config{Addrs: []string{"postgres://a b:%zz@x/"}}, Want: "postgres://a b:%zz@x/"},
		{Name: "unknown param", Config: backends.Config{Addrs: addr, Params: p("mdoe", "lease")}, Want: "mdoe"},
		{Name: "bad mode", Config: backends.Config{Addrs: addr, Params: p("mode", "exclusive")}, Want: `"exclusive"`},
		{Name: "table in advisory mode", Config: backends.Config{Addrs: addr, Params: p("mode", "advisory", "table", "locks")}, Want: `table="locks"`},
		{Name: "bad table", Config: backends.Config{Addrs: addr, Params: p("table", "locks; DROP TABLE x")}, Want: `"locks; DROP TABLE x"`},
		{Name: "database with a URL", Config: backends.Config{Addrs: []string{"postgres://u@h/db"}, Params: p("database", "other")}, Want: `database="other"`},
		{Name: "bad maxconns", Config: backends.Config{Addrs: addr, Params: p("maxconns", "many")}, Want: `maxconns="many"`},
		{Name: "zero maxconns", Config: backends.Config{Addrs: addr, Params: p("maxconns", "0")}, Want: "maxconns=0"},
		{Name: "keepalive not a duration", Config: backends.Config{Addrs: addr, Params: p("mode", "advisory", "keepalive", "soon")}, Want: `keepalive="soon"`},
		{Name: "keepalive too short", Config: backends.Config{Addrs: addr, Params: p("mode", "advisory", "keepalive", "2s")}, Want: `keepalive="2s"`},
		{Name: "keepalive not whole seconds", Config: backends.Config{Addrs: addr, Params: p("mode", "advisory", "keepalive", "3500ms")}, Want: `keepalive="3500ms"`},
		{Name: "keepalive in lease mode", Config: backends.Config{Addrs: addr, Params: p("keepalive", "3s")}, Want: `keepalive="3s"`},
	})
	if _, err := New(nil, Options{}); !errors.Is(err, locker.ErrInvalid) {
		t.Fatalf("New(nil) = %v, want ErrInvalid", err)
	}
}

// TestInfo: what lockbench backends prints — one node, no failover, and
// fencing only in lease mode; the default mode is lease.
func TestInfo(t *testing.T) {
	for _, tc := range []struct {
		params  map[string]string
		mode    Mode
		fencing bool
		says    []string
	}{
		{nil, Lease, true, []string{"single node, no failover", "fencing token", "lockbench_leases"}},
		{map[string]string{"mode": "lease", "table": "app.locks"}, Lease, true, []string{"app.locks"}},
		{map[string]string{"mode": "advisory"}, Advisory, false, []string{"single node, no failover", "no fencing token", "restart"}},
	} {
		l := backendstest.Open(t, "postgres", backends.Config{Addrs: []string{"db.example:5433"}, Params: tc.params}).(*Locker)
		info := l.Info()
		l.Close()
		if l.Mode() != tc.mode || info.Name != "postgres" || info.Quorum != 1 || info.Fencing != tc.fencing ||
			len(info.Nodes) != 1 || info.Nodes[0] != "db.example:5433" {
			t.Errorf("params %v: mode %s, Info %+v", tc.params, l.Mode(), info)
		}
		for _, s := range tc.says {
			if !strings.Contains(info.Guarantee, s) {
				t.Errorf("params %v: guarantee %q does not say %q", tc.params, info.Guarantee, s)
			}
		}
	}
}

// TestURLAndCredentials: a postgres:// URL is taken as given, and the
// config's username replaces the default one.
func TestURLAndCredentials(t *testing.T) {
	addr := shared.Get(t)
	for name, cfg := range map[string]backends.Config{
		"url":      {Addrs: []string{"postgres://postgres@" + addr + "/postgres?sslmode=disable"}},
		"username": {Addrs: []string{addr}, Username: "postgres", Params: map[string]string{"database": "template1"}},
	} {
		t.Run(name, func(t *testing.T) {
			l := backendstest.OpenClosed(t, "postgres", cfg)
			lease := locktest.MustAcquire(t, l, "url:"+name, locker.WithTTL(time.Minute))
			if err := lease.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	l := backendstest.OpenClosed(t, "postgres", backends.Config{Addrs: []string{addr}, Username: "nobody"})
	if _, err := l.TryAcquire(context.Background(), "k"); !errors.Is(err, locker.ErrUnavailable) || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("TryAcquire as an unknown user = %v, want ErrUnavailable naming the user", err)
	}
}
