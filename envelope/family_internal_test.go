package envelope

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/lockbench/lockbench/backends/all"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/nemesis"
)

// TestFamiliesSizeTheirFault: every family's fault parses at the ends of
// its range, and carries its size (plus its offset: a clock's rate is 1 +
// what it gains) in its param; a family that needs several nodes is left
// out for a lock on one.
func TestFamiliesSizeTheirFault(t *testing.T) {
	for _, spec := range []string{"redlock", "redis"} {
		b, err := bench.ParseBackend(spec)
		if err != nil {
			t.Fatal(err)
		}
		fams, err := Families(Names(), b)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range fams {
			names = append(names, f.Name)
			for _, size := range []float64{f.Min, 1, f.Max} {
				fault, err := nemesis.Parse(f.spec(size))
				if err != nil {
					t.Fatalf("%s at %g: %v", f.Name, size, err)
				}
				_, query, _ := strings.Cut(fault.Spec, "?")
				v, err := url.ParseQuery(query)
				if err != nil {
					t.Fatal(err)
				}
				got, err := strconv.ParseFloat(v.Get(f.Param), 64)
				if err != nil || got != f.Offset+size {
					t.Errorf("%s at %g: %s=%q, want %g", f.Name, size, f.Param, v.Get(f.Param), f.Offset+size)
				}
			}
		}
		want := "client-pause client-pause-acquire client-pause-extend clock-jump clock-jump-minority clock-jump-back clock-rate restart-delay " +
			"partition split-view failover"
		if spec == "redis" {
			want = "client-pause client-pause-acquire client-pause-extend clock-jump clock-jump-back clock-rate restart-delay partition " +
				"failover"
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("%s: families %q, want %q", spec, got, want)
		}
	}
	if _, err := Families([]string{"clock-skew"}, bench.Backend{}); err == nil || !strings.Contains(err.Error(), `"clock-skew"`) {
		t.Errorf("an unknown family: %v, want an error naming it", err)
	}
	// The cuts fit the locks whose clients they can cut: split views need
	// several nodes on one peer network.
	for _, c := range []struct{ family, backend, why string }{
		{"partition", "redis", ""}, {"partition", "zookeeper", ""}, {"split-view", "redlock", ""}, {"split-view", "etcd", ""},
		{"split-view", "sentinel", "at least 3 nodes"}, {"failover", "sentinel", ""}, {"failover", "redis", "no replica to fail over to"},
	} {
		b, err := bench.ParseBackend(c.backend)
		if err != nil {
			t.Fatal(err)
		}
		if got := families[c.family][0].fits(b); c.why == "" && got != "" || c.why != "" && !strings.Contains(got, c.why) {
			t.Errorf("%s on %s: fits says %q, want %q", c.family, c.backend, got, c.why)
		}
	}
	rate := families["clock-rate"][0]
	if got := rate.spec(0.25); got != "clock-rate?nodes=majority&rate=1.25" {
		t.Errorf("clock-rate at 0.25: %q", got)
	}
}

// TestProbeCostsFollowTheirCases: a search's share of the budget follows
// what its probes cost: a delayed restart's cases (holds of three TTLs,
// the delay in each injection) cost more than a pause's at its largest
// (3 leases), and a failover's (the sentinels' wait and a lease after the
// kill) more than twice as much.
func TestProbeCostsFollowTheirCases(t *testing.T) {
	cost := func(family, backend string) time.Duration {
		b, err := bench.ParseBackend(backend)
		if err != nil {
			t.Fatal(err)
		}
		return families[family][0].probeCost(b, 3)
	}
	pause, restart, failover := cost("client-pause", "redis"), cost("restart-delay", "redis"), cost("failover", "sentinel")
	t.Logf("probe costs: client-pause %v, restart-delay %v, failover %v", pause, restart, failover)
	if !(restart > pause && failover > 2*pause) {
		t.Errorf("probe costs: client-pause %v, restart-delay %v, failover %v: want a restart above a pause, a failover above twice it",
			pause, restart, failover)
	}
	// One failover a case, however many injections a probe asks for.
	if b, _ := bench.ParseBackend("sentinel"); families["failover"][0].probeCost(b, 1) != failover {
		t.Error("a failover probe's cost grows with the injections asked")
	}
}
