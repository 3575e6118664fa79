package results_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/lockbench/lockbench/results"
)

func caseWith(t *testing.T, host string, latencies []int64) results.Case {
	t.Helper()
	h := results.NewHistogram()
	for _, v := range latencies {
		if err := h.RecordValue(v); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := results.Encode(h)
	if err != nil {
		t.Fatal(err)
	}
	return results.Case{
		Backend: "redlock", Workload: "hot", Fault: "none", Guard: "none", Clients: 4, Host: host,
		Acquired: int64(len(latencies)), DurationS: 2, Overlaps: 1,
		Errors: map[string]int64{results.ErrNode: 1}, Timeline: []int64{int64(len(latencies))},
		LatencyUS: results.Summarise(h), Histograms: results.Histograms{Acquire: enc},
	}
}

func TestMergeAddsHostsWithoutLoss(t *testing.T) {
	var a, b, all []int64
	for i := int64(1); i <= 1000; i++ {
		a = append(a, i)          // host a: 1..1000 µs
		b = append(b, 100000+i*7) // host b: much slower
	}
	all = append(append(all, a...), b...)
	fa := &results.File{Hosts: []string{"a"}, Cases: []results.Case{caseWith(t, "a", a)}}
	fb := &results.File{Hosts: []string{"b"}, Cases: []results.Case{caseWith(t, "b", b)}}
	m, err := results.Merge(fa, fb)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) != 1 || !reflect.DeepEqual(m.Hosts, []string{"a", "b"}) {
		t.Fatalf("merged into %d cases from hosts %v", len(m.Cases), m.Hosts)
	}
	c := m.Cases[0]
	want := caseWith(t, "", all)
	if c.LatencyUS != want.LatencyUS {
		t.Fatalf("merged percentiles %+v, want those of all operations %+v", c.LatencyUS, want.LatencyUS)
	}
	if c.Acquired != 2000 || c.Throughput != 1000 || c.Overlaps != 2 || c.Errors[results.ErrNode] != 2 || c.Timeline[0] != 2000 {
		t.Fatalf("merged counts wrong: %+v", c)
	}
	if c.Host != "a+b" {
		t.Fatalf("merged host %q", c.Host)
	}
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	f := &results.File{Started: time.Unix(1, 0).UTC(), Cases: []results.Case{caseWith(t, "h", []int64{5, 6})}}
	if err := results.Write(path, f); err != nil {
		t.Fatal(err)
	}
	g, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, g) {
		t.Fatalf("read back %+v, wrote %+v", g, f)
	}
}

func TestKeySeparatesDurabilityProfiles(t *testing.T) {
	c := results.Case{Backend: "redis", Workload: "hot", Fault: "restart", Guard: "fence", Clients: 8}
	legacy := c.Key()
	if legacy != "redis|hot|restart|fence|8" {
		t.Fatalf("key without a profile %q changed", legacy)
	}
	fast, durable := c, c
	fast.Durability, durable.Durability = results.DurabilityFast, results.DurabilityDurable
	if fast.Key() == durable.Key() || fast.Key() == legacy {
		t.Fatalf("keys %q and %q do not tell the profiles apart", fast.Key(), durable.Key())
	}
}
