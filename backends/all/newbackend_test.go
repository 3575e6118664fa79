package all_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// throwaway is a backend that exists only in this test binary: a package
// would register it in its init, and backends/all would import that
// package. Nothing else in lockbench changes for it; its variant, which
// runs under one fault, is one rule of the case table (package suites).
const throwaway = "throwaway"

func init() {
	backends.Register(backends.Descriptor{
		Name:    throwaway,
		Doc:     "the redis lock under another name, to show what adding a backend takes",
		Open:    redis.Open,
		Servers: backends.Servers{Kind: backends.Redis, Count: 1},
		// Its leases outlive their TTL twice over.
		Lease:     func(ttl time.Duration, _ map[string]string) time.Duration { return 2 * ttl },
		Variants:  []backends.Variant{{}, {Params: "fencing=false", Listed: true}},
		Endpoints: backends.Endpoints{Flag: throwaway, Usage: "the throwaway's Redis server", Auth: redis.Auth},
	})
}

// TestAddingABackendIsOnePackage: a backend registered with a descriptor
// and nothing else is listed, sized, put by the suites under the faults
// that apply to it (its variant under the one its rule gives), skipped under
// the others with the reason of its servers' kind (which it does not
// restate), given servers, and measured end to end.
func TestAddingABackendIsOnePackage(t *testing.T) {
	if !slices.Contains(bench.Listed(), throwaway) || !slices.Contains(bench.Listed(), throwaway+"?fencing=false") {
		t.Fatalf("Listed = %v", bench.Listed())
	}
	b, err := bench.ParseBackend(throwaway)
	if err != nil {
		t.Fatal(err)
	}
	// Why a failover cannot apply is its servers' kind's to say: one
	// Redis server has no replica.
	throwawayWhy := bench.Shape(b).Reason(nemesis.Failover)
	if !strings.Contains(throwawayWhy, "one standalone Redis server has no replica") {
		t.Fatalf("the kind's reason for no failover: %q", throwawayWhy)
	}
	if got := bench.Lease(b, time.Second); got != 2*time.Second {
		t.Errorf("lease of a 1s TTL = %v, want the descriptor's 2s", got)
	}
	suite := suites.Default()
	suite.Rules = append(suite.Rules, suites.Rule{Backends: suites.Specs(throwaway + "?fencing=false"), Faults: []string{"client-pause"}})
	plan, err := suite.Plan()
	if err != nil {
		t.Fatal(err)
	}
	cases := plan.Cases
	faults := map[string][]string{}
	for _, c := range cases {
		if strings.HasPrefix(c.Backend.Spec, throwaway) {
			faults[c.Backend.Spec] = append(faults[c.Backend.Spec], c.Fault.Spec)
		}
	}
	for _, want := range []string{"none", "client-pause", "server-pause", "restart", "clock-jump", "partition"} {
		if !slices.Contains(faults[throwaway], want) {
			t.Errorf("the default suite does not run %s under %s: %v", throwaway, want, faults[throwaway])
		}
	}
	if !slices.ContainsFunc(plan.Skipped, func(s results.Skip) bool {
		return s.Backend == throwaway && s.FaultClass == "latency" && strings.Contains(s.Reason, "make bench-full runs it")
	}) {
		t.Errorf("the default suite does not say it leaves latency on %s to the full suite", throwaway)
	}
	if len(faults[throwaway+"?fencing=false"]) == 0 {
		t.Error("the default suite does not run the variant its rule gives")
	}
	for _, f := range faults[throwaway+"?fencing=false"] {
		if !strings.HasPrefix(f, "client-pause") {
			t.Errorf("the variant runs under %s, not only client-pause", f)
		}
	}
	if slices.Contains(faults[throwaway], "failover") {
		t.Error("the throwaway runs a failover its descriptor says cannot apply")
	}
	skipped := map[string]string{}
	for _, s := range plan.Skipped {
		if s.Backend == throwaway {
			skipped[s.FaultClass] = s.Reason
		}
	}
	if skipped["failover"] != throwawayWhy {
		t.Errorf("failover skipped for %q, want the kind's reason", skipped["failover"])
	}

	// End to end: a fault-free case measured on the servers the runner
	// starts for it, and a failover skipped with its reason in the results.
	m, err := suites.Cross(suites.Matrix{
		Backends: []string{throwaway}, Workloads: []workloads.Workload{workloads.Hot}, Faults: []string{"none", "failover"},
		Guards: []judge.Guard{judge.GuardFence}, Clients: []int{2}, ClientsAs: results.ClientsGoroutines,
		Spec: workloads.Spec{Duration: 300 * time.Millisecond, TTL: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &bench.Runner{Clusters: bench.NewClusters(composetest.ForTest(t), nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := r.Run(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != 1 || f.Cases[0].Backend != throwaway || f.Cases[0].Acquired == 0 || f.Cases[0].Overlaps != 0 || f.Cases[0].Nodes != 1 {
		t.Fatalf("cases %+v: want one clean case of the throwaway on its one server", f.Cases)
	}
	if len(f.Skipped) != 1 || f.Skipped[0].Reason != throwawayWhy {
		t.Fatalf("skipped %+v: want the failover, with the kind's reason", f.Skipped)
	}
}
