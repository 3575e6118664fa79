package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
)

// TestRedlockBootstrap: the admit command that Redlock's descriptor
// offers, `lockbench redlock bootstrap`: on nodes just started it refuses
// without --force (they are younger than the max TTL) and says what to
// do; with --force it admits them; run again, it refuses nodes in use;
// and it refuses one server given twice and a bad --maxttl.
func TestRedlockBootstrap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := redis.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 3}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	list := strings.Join(addrs, ",")
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error, or in stdout when ok
		ok   bool
	}{
		{"no addresses", nil, "--addrs is required", false},
		{"bad max TTL", []string{"--addrs", list, "--maxttl", "soon"}, "soon", false},
		{"one server twice", []string{"--addrs", addrs[0] + "," + addrs[0]}, "given twice", false},
		{"young nodes", []string{"--addrs", list}, "--force", false},
		{"forced", []string{"--addrs", list, "--force"}, "admitted 3 nodes", true},
		{"in use", []string{"--addrs", list, "--force"}, "already in use", false},
		{"in use, not forced", []string{"--addrs", list, "--maxttl", "1s"}, "already in use", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := lockbench(t, append([]string{"redlock", "bootstrap"}, tc.args...)...)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("bootstrap %v: %v", tc.args, err)
			case tc.ok && !strings.Contains(out, tc.want):
				t.Fatalf("bootstrap %v printed %q, want %q", tc.args, out, tc.want)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("bootstrap %v = %v, want a refusal naming %q", tc.args, err, tc.want)
			}
			t.Log(strings.TrimSpace(out), err)
		})
	}
}
