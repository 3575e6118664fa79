package nemesis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	_ "github.com/lockbench/lockbench/backends/redlock/redlockbackend"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/workloads"
	"github.com/lockbench/lockbench/workloads/nemesis"
)

// run runs a short hot-key load of 4 clients on backend redlock (with
// params) against nodes under the named fault, and returns the outcome.
func run(t *testing.T, nodes []*compose.Node, proxied bool, fault string, params map[string]string) *workloads.Outcome {
	t.Helper()
	s, err := nemesis.Lookup(fault)
	if err != nil {
		t.Fatal(err)
	}
	target := nemesis.Target{Redis: nodes}
	cfg := backends.Config{Params: map[string]string{"bootstrap": "true", "maxttl": "2s"}}
	for k, v := range params {
		cfg.Params[k] = v
	}
	for _, n := range nodes {
		if proxied {
			cfg.Addrs = append(cfg.Addrs, n.Addr())
			target.Proxies = append(target.Proxies, n.Proxy())
		} else {
			cfg.Addrs = append(cfg.Addrs, n.ServerAddr())
		}
	}
	if err := s.Applies(target); err != nil {
		t.Fatal(err)
	}
	hold, _ := workloads.Constant(time.Millisecond)
	spec, err := workloads.Spec{
		Workload: workloads.Hot, Clients: 4, TTL: max(s.MinTTL, time.Second), Duration: 4 * time.Second, Hold: hold,
		KeyPrefix: fmt.Sprintf("%s:%d:", t.Name(), time.Now().UnixNano()),
	}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	lockers := make([]locker.Locker, spec.Clients)
	for i := range lockers {
		if lockers[i], err = backends.Open("redlock", cfg); err != nil {
			t.Fatal(err)
		}
		defer lockers[i].Close()
	}
	out, err := workloads.Run(context.Background(), spec, lockers, nil, s.Hooks(target, spec))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if !n.Running() || n.Paused() {
			t.Errorf("%s was left down by %s", n.Name, fault)
		}
	}
	return out
}

func redis5(t *testing.T) []*compose.Node {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := compose.ForTest(t).Redis(ctx, 5, compose.RedisOptions{Proxied: true})
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// TestRestart is the seed's delayed-restart argument measured: a majority
// of nodes restarted without their data while a holder is inside its
// section lets another client in, unless the quarantine keeps the
// restarted nodes out of the quorum.
func TestRestart(t *testing.T) {
	nodes := redis5(t)
	// One restart is one chance of a double grant, which a loaded machine
	// can make the other clients miss: allow three.
	var plain *workloads.Outcome
	for range 3 {
		if plain = run(t, nodes, false, "restart", map[string]string{"quarantine": "false"}); plain.Safety.Overlaps > 0 {
			break
		}
	}
	if plain.Safety.Overlaps == 0 {
		t.Errorf("restart without quarantine: no overlap in three runs (%d sections in the last)", plain.Acquired)
	}
	guarded := run(t, nodes, false, "restart", nil)
	if guarded.Safety.Overlaps != 0 {
		t.Errorf("restart with quarantine: %d overlaps", guarded.Safety.Overlaps)
	}
	for _, o := range []*workloads.Outcome{plain, guarded} {
		if len(o.Windows) != 1 || o.Windows[0].Label != "restart without data" {
			t.Errorf("fault windows %+v, want the restart's", o.Windows)
		}
	}
	t.Logf("overlaps: %d without quarantine, %d with", plain.Safety.Overlaps, guarded.Safety.Overlaps)
}

// TestMinorityFaultsHeal runs the window faults that break a minority and
// checks that grants go on during them and that everything is healed.
func TestMinorityFaultsHeal(t *testing.T) {
	nodes := redis5(t)
	for _, tc := range []struct {
		fault   string
		proxied bool
		label   string
	}{
		{"crash-minority", false, "2 node(s) down"},
		{"partition", true, "2 node(s) partitioned"},
		{"latency", true, "2 node(s) +50ms"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			out := run(t, nodes, tc.proxied, tc.fault, nil)
			if len(out.Windows) != 1 || out.Windows[0].Label != tc.label {
				t.Fatalf("fault windows %+v, want one %q", out.Windows, tc.label)
			}
			w := out.Windows[0]
			step := out.TimelineStep.Seconds()
			var during int64
			for i, n := range out.Timeline {
				if at := float64(i) * step; at >= w.StartS && at < w.EndS {
					during += n
				}
			}
			if during == 0 {
				t.Fatalf("no grant during %s (%.1fs-%.1fs): a majority was up", tc.fault, w.StartS, w.EndS)
			}
			if out.Safety.Overlaps != 0 {
				t.Fatalf("%d overlaps under %s", out.Safety.Overlaps, tc.fault)
			}
			// Healed: every node answers through its proxy again.
			for _, n := range nodes {
				c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, ReadTimeout: time.Second, DialTimeout: time.Second})
				err := c.Ping(context.Background()).Err()
				c.Close()
				if err != nil {
					t.Fatalf("%s unreachable through its proxy after %s: %v", n.Name, tc.fault, err)
				}
			}
		})
	}
}
