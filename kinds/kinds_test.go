package kinds_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/kinds"
	_ "github.com/lockbench/lockbench/kinds/all"
	"github.com/lockbench/lockbench/nemesis"
)

// TestShape: the shape of servers before any starts is what their kind
// offers, with the kind's reasons for what it lacks (etcd's clock written
// once, in its package), less what this machine cannot start them with,
// for the mechanism's reason; no servers lack everything for one reason,
// and a kind nobody registered says so.
func TestShape(t *testing.T) {
	if got := kinds.Names(); !slices.Equal(got, []backends.Kind{backends.Etcd, backends.Postgres, backends.Redis, backends.Sentinel, backends.ZooKeeper}) {
		t.Fatalf("registered kinds %v", got)
	}
	tests := []struct {
		servers backends.Servers
		has     nemesis.Capability
		lacks   nemesis.Capability
		says    string
	}{
		{backends.Servers{Kind: backends.Etcd, Count: 3}, nemesis.Servers | nemesis.Election | nemesis.Minority, nemesis.MovableClock, "vDSO"},
		{backends.Servers{Kind: backends.Redis, Count: 5}, nemesis.Servers | nemesis.Minority | nemesis.Proxy, nemesis.Failover, "5 independent Redis masters"},
		{backends.Servers{Kind: backends.Redis, Count: 1}, nemesis.Servers | nemesis.Proxy, nemesis.Minority, "one Redis server"},
		{backends.Servers{Kind: backends.Sentinel, Count: 2}, nemesis.Servers | nemesis.Failover | nemesis.Leadership, nemesis.Proxy, "follow the master"},
		{backends.Servers{Kind: backends.ZooKeeper, Count: 3}, nemesis.Election | nemesis.Leadership, nemesis.Failover, "ZooKeeper has no Sentinel"},
		{backends.Servers{Kind: backends.Postgres, Count: 1}, nemesis.Servers, nemesis.Election, "one PostgreSQL server"},
		{backends.Servers{}, 0, nemesis.Servers | nemesis.Proxy | nemesis.Election, "no servers"},
		{backends.Servers{Kind: "memcached", Count: 1}, 0, nemesis.Servers, `"memcached"`},
	}
	for _, tc := range tests {
		sh := kinds.Shape(tc.servers)
		if !sh.Has(tc.has) || sh.Nodes != tc.servers.Count && tc.has != 0 {
			t.Errorf("%v: shape %v with %d nodes, want %v", tc.servers, sh.Caps, sh.Nodes, tc.has)
		}
		for _, c := range []nemesis.Capability{tc.lacks & -tc.lacks, tc.lacks} {
			if sh.Has(c) || !strings.Contains(sh.Reason(c), tc.says) {
				t.Errorf("%v lacks %v: has it %v, reason %q, want one that says %q", tc.servers, c, sh.Has(c), sh.Reason(c), tc.says)
			}
		}
	}
	// A mechanism this machine lacks is lacking, for its own reason.
	for c, err := range kinds.Available() {
		sh := kinds.Shape(backends.Servers{Kind: backends.Redis, Count: 5})
		if c == nemesis.PeerLinks {
			continue // Redis masters have no peers to cut apart
		}
		if (err == nil) != sh.Has(c) || err != nil && !strings.Contains(sh.Reason(c), err.Error()) {
			t.Errorf("mechanism %v available: %v; redis has it: %v (%q)", c, err, sh.Has(c), sh.Reason(c))
		}
	}
}

// TestVersions: the registered kinds report the versions of their server
// software by program, each what this machine has (none is required).
func TestVersions(t *testing.T) {
	known := []string{"redis-server", "java", "zookeeper", "postgres", "etcd"}
	for program, v := range kinds.Versions(t.Context()) {
		if !slices.Contains(known, program) || v == "" {
			t.Errorf("version %q of %q: want a version of one of %v", v, program, known)
		}
	}
}
