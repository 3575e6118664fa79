package nemesis_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/nemesis"
)

func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range nemesis.Names() {
		if seen[name] {
			t.Fatalf("scenario %q listed twice", name)
		}
		seen[name] = true
		s, err := nemesis.Lookup(name)
		if err != nil || s.Name != name || s.Doc == "" {
			t.Fatalf("Lookup(%q) = %+v, %v", name, s, err)
		}
	}
	for _, want := range []string{"none", "client-pause", "server-pause", "failover", "restart", "crash", "power-loss", "clock-jump", "clock-rate", "crash-minority", "partition", "latency", "leader-kill"} {
		if !seen[want] {
			t.Errorf("the catalogue lacks %q", want)
		}
	}
	if _, err := nemesis.Lookup("meteor"); !errors.Is(err, nemesis.ErrFault) || !strings.Contains(err.Error(), "meteor") {
		t.Fatalf("Lookup of an unknown fault = %v, want ErrFault naming it", err)
	}
}

func TestParse(t *testing.T) {
	f, err := nemesis.Parse("clock-jump?by=0.5&nodes=minority")
	if err != nil || f.Class() != "clock-jump" || f.Spec != "clock-jump?by=0.5&nodes=minority" || f.Params.Get("by") != "0.5" {
		t.Fatalf("Parse = %+v, %v", f, err)
	}
	for _, bad := range []string{"clock-jump?by=-1", "clock-jump?nodes=all", "clock-rate?rate=0", "power-loss?delay=-1", "power-loss?by=1", "client-pause?y=2", "client-pause?at=never", "none?x=1", "meteor", "client-pause?x=%zz"} {
		if _, err := nemesis.Parse(bad); !errors.Is(err, nemesis.ErrFault) {
			t.Errorf("Parse(%q) = %v, want ErrFault", bad, err)
		}
	}
}

func TestFits(t *testing.T) {
	// The shapes of the clusters the runner starts (with the members of a
	// quorum cluster in network namespaces of their own).
	shapes := map[string]nemesis.Shape{
		"none":      {},
		"redis":     {Nodes: 1, Proxied: true, LazyFS: true, FakeClock: true, Netns: true},
		"redis×5":   {Nodes: 5, Proxied: true, LazyFS: true, FakeClock: true, Netns: true},
		"sentinel":  {Nodes: 2, Leader: true, Sentinel: true},
		"zookeeper": {Nodes: 3, Elects: true, Leader: true, Members: true, Proxied: true, LazyFS: true, FakeClock: true, Netns: true},
		"etcd":      {Nodes: 3, Elects: true, Leader: true, Members: true, Proxied: true, LazyFS: true, Netns: true},
		"postgres":  {Nodes: 1, Proxied: true, LazyFS: true, FakeClock: true, Netns: true},
		"plain":     {Nodes: 3, Proxied: true}, // servers started without what the faults below need
	}
	want := map[string][]string{ // scenario -> the shapes it fits
		"none":             {"none", "redis", "redis×5", "sentinel", "zookeeper", "etcd", "postgres", "plain"},
		"client-pause":     {"none", "redis", "redis×5", "sentinel", "zookeeper", "etcd", "postgres", "plain"},
		"server-pause":     {"redis", "redis×5", "sentinel", "zookeeper", "etcd", "postgres", "plain"},
		"failover":         {"sentinel"},
		"restart":          {"redis", "redis×5", "sentinel", "zookeeper", "etcd", "postgres", "plain"},
		"crash":            {"redis", "redis×5", "sentinel", "zookeeper", "etcd", "postgres", "plain"},
		"power-loss":       {"redis", "redis×5", "zookeeper", "etcd", "postgres"},
		"clock-jump":       {"redis", "redis×5", "zookeeper", "postgres"},
		"clock-rate":       {"redis", "redis×5", "zookeeper", "postgres"},
		"crash-minority":   {"redis×5", "zookeeper", "etcd", "plain"},
		"partition":        {"redis", "redis×5", "zookeeper", "etcd", "postgres"},
		"latency":          {"redis", "redis×5", "zookeeper", "etcd", "postgres", "plain"},
		"partition-leader": {"zookeeper", "etcd"},
		"partition-halves": {"zookeeper", "etcd"},
		"leader-kill":      {"zookeeper", "etcd"},
	}
	for name, fits := range want {
		s, err := nemesis.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for shape, sh := range shapes {
			got := s.Fits(sh) == nil
			expected := false
			for _, f := range fits {
				expected = expected || f == shape
			}
			if got != expected {
				t.Errorf("%s fits %s = %v, want %v (%v)", name, shape, got, expected, s.Fits(sh))
			}
		}
	}
}
