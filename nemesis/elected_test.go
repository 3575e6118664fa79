package nemesis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	_ "github.com/lockbench/lockbench/backends/etcd"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds"
	_ "github.com/lockbench/lockbench/kinds/etcd"
)

// TestElectedFaults runs the faults of a cluster whose members elect
// their leader (partition-leader, leader-kill) on three etcd members
// started as the runner starts them (their kind's Start), through the
// leader and the member links the kind wraps for the nemesis: each
// injection strikes the leader, and its effect says what the members
// showed.
func TestElectedFaults(t *testing.T) {
	composetest.StartsServersWithin(t, 3*time.Minute)
	if err := compose.PeerNetworkAvailable(); err != nil {
		t.Skip(err)
	}
	k, err := kinds.Lookup(backends.Etcd)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := k.Start(ctx, composetest.ForTest(t), kinds.Spec{Count: 3, Durability: compose.DurabilityFast})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Target.Leader == nil || cl.Target.Members == nil {
		t.Fatalf("the members' target has leader %v, members %v: want both", cl.Target.Leader, cl.Target.Members)
	}
	cfg := backends.Config{Addrs: cl.Addrs(false)}
	for _, tc := range []struct {
		fault string
		says  string
	}{
		{"partition-leader", "lost its peers"},
		{"leader-kill", "killed"},
	} {
		out := runTTL(t, "etcd", cfg, cl.Target, tc.fault, time.Second, 10*time.Second)
		if len(out.Failures) > 0 || len(out.Targets) == 0 {
			t.Fatalf("%s: injections %+v, failures %v", tc.fault, out.Targets, out.Failures)
		}
		t.Logf("%s: effects: %v", tc.fault, effects(out.Targets))
		for _, tg := range out.Targets {
			if !tg.Leader || len(tg.Nodes) != 1 || !strings.Contains(tg.Effect, tc.says) {
				t.Errorf("%s: injection %d hit %v (leader %v), effect %q: want the leader, and %q", tc.fault, tg.Injection, tg.Nodes,
					tg.Leader, tg.Effect, tc.says)
			}
		}
	}
}
