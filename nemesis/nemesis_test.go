package nemesis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

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
	if f, err := nemesis.Parse("clock-jump?back=1&by=0.5"); err != nil || f.Params.Get("back") != "1" {
		t.Errorf("a backward jump: %+v, %v", f, err)
	}
	for _, bad := range []string{"clock-jump?by=-1", "clock-jump?back=2", "clock-jump?nodes=all", "clock-rate?rate=0", "power-loss?delay=-1", "power-loss?by=1", "client-pause?y=2", "client-pause?at=never", "none?x=1", "meteor", "client-pause?x=%zz",
		"partition?x=0", "split-view?x=-1", "client-leader?x=many"} {
		if _, err := nemesis.Parse(bad); !errors.Is(err, nemesis.ErrFault) {
			t.Errorf("Parse(%q) = %v, want ErrFault", bad, err)
		}
	}
}

// TestCutLength: a cut's x sizes how long it lasts, in leases, whatever
// the default window would be (a second at least, 4 s on a Sentinel set).
func TestCutLength(t *testing.T) {
	sentinel := nemesis.Shape{Nodes: 2, Caps: nemesis.Servers | nemesis.Leadership | nemesis.Failover | nemesis.ClientLinks}
	redlock := nemesis.Shape{Nodes: 5, Caps: nemesis.Servers | nemesis.Minority | nemesis.ClientLinks | nemesis.ClientNets}
	lease := 400 * time.Millisecond
	for _, c := range []struct {
		spec string
		sh   nemesis.Shape
		cut  time.Duration // the injection's span is the cut and half a lease
	}{
		{"partition", redlock, time.Second},
		{"partition", sentinel, 4 * time.Second},
		{"partition?x=0.5", redlock, lease / 2},
		{"partition?x=0.5", sentinel, lease / 2},
		{"split-view", redlock, time.Second},
		{"split-view?x=3", redlock, 3 * lease},
		{"client-leader?x=2", redlock, 2 * lease},
	} {
		f, err := nemesis.Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := f.MinDuration(c.sh, lease, 3), 3*(c.cut+lease/2)*4/3; got != want {
			t.Errorf("%s: MinDuration of 3 injections = %v, want %v", c.spec, got, want)
		}
	}
}

func TestFits(t *testing.T) {
	// The shapes of the clusters the runner starts (with the members of a
	// quorum cluster in network namespaces of their own).
	quorum := nemesis.Servers | nemesis.Minority | nemesis.Leadership | nemesis.Election | nemesis.PeerLinks |
		nemesis.Proxy | nemesis.LosableData | nemesis.ClientLinks
	shapes := map[string]nemesis.Shape{
		"none":      {},
		"redis":     {Nodes: 1, Caps: nemesis.Servers | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock | nemesis.ClientLinks},
		"redis×5":   {Nodes: 5, Caps: nemesis.Servers | nemesis.Minority | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock | nemesis.ClientLinks},
		"sentinel":  {Nodes: 2, Caps: nemesis.Servers | nemesis.Leadership | nemesis.Failover},
		"zookeeper": {Nodes: 3, Caps: quorum | nemesis.MovableClock},
		"etcd":      {Nodes: 3, Caps: quorum},
		"postgres":  {Nodes: 1, Caps: nemesis.Servers | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock | nemesis.ClientLinks},
		"plain":     {Nodes: 3, Caps: nemesis.Servers | nemesis.Minority | nemesis.Proxy}, // servers started without what the faults below need
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
		"mixed":            {"redis", "redis×5", "sentinel", "zookeeper", "etcd", "postgres", "plain"},
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
			var na *nemesis.Inapplicable
			if err := s.Fits(sh); err != nil && (!errors.As(err, &na) || na.Reason == "" || na.Missing == 0) {
				t.Errorf("%s on %s: %v, want an *Inapplicable naming the missing capability and why", name, shape, err)
			}
		}
	}
}

// TestInapplicableReason: a scenario that does not apply names the first
// capability it requires that the cluster lacks, with the cluster's own
// reason for it, or what the capability takes when the cluster gives none.
func TestInapplicableReason(t *testing.T) {
	etcd := nemesis.Shape{Nodes: 3, Caps: nemesis.Servers | nemesis.Election,
		Why: map[nemesis.Capability]string{nemesis.MovableClock: "no clock preload reaches a Go program"}}
	tests := []struct {
		fault   string
		sh      nemesis.Shape
		missing nemesis.Capability
		reason  string
	}{
		{"clock-jump", etcd, nemesis.MovableClock, "no clock preload reaches a Go program"},
		{"clock-rate", nemesis.Shape{}, nemesis.Servers, "applies to backends with servers"},
		{"partition-halves", etcd, nemesis.PeerLinks, "needs the members in network namespaces of their own (root and the ip command), or each on a host of its own"},
		{"partition-leader", nemesis.Shape{Nodes: 1, Caps: nemesis.Servers, Why: map[nemesis.Capability]string{nemesis.Election: "one server"}},
			nemesis.Election, "one server"},
	}
	for _, tc := range tests {
		s, err := nemesis.Lookup(tc.fault)
		if err != nil {
			t.Fatal(err)
		}
		var na *nemesis.Inapplicable
		if err := s.Fits(tc.sh); !errors.As(err, &na) || na.Missing != tc.missing || na.Reason != tc.reason || na.Fault != tc.fault {
			t.Errorf("%s: Fits = %#v, want %v missing: %q", tc.fault, err, tc.missing, tc.reason)
		}
		if got := tc.sh.Reason(tc.missing); got != tc.reason {
			t.Errorf("%s: Reason(%v) = %q, want %q", tc.fault, tc.missing, got, tc.reason)
		}
	}
	if got := nemesis.Capability(nemesis.Election | nemesis.Servers).String(); got != "servers+election" {
		t.Errorf("String = %q", got)
	}
}

// TestFailoverSize: failover's x is the sentinels' wait in leases, and a
// case stretches so that the wait, the election and a lost section's
// hold fit after the kill, a third into the case, once whatever the
// injections asked (one failover spends the set); without x the failover
// keeps the set's own wait and asks for no length.
func TestFailoverSize(t *testing.T) {
	sentinel := nemesis.Shape{Nodes: 2, Caps: nemesis.Servers | nemesis.Leadership | nemesis.Failover}
	lease := 10 * time.Second
	for _, c := range []struct {
		spec string
		want time.Duration
	}{
		{"failover", 0},
		{"failover?x=0.5", (5*time.Second + lease + 3*time.Second) * 3 / 2},
		{"failover?x=2", (20*time.Second + lease + 3*time.Second) * 3 / 2},
	} {
		f, err := nemesis.Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 3} {
			if got := f.MinDuration(sentinel, lease, n); got != c.want {
				t.Errorf("%s: MinDuration of %d injections = %v, want %v", c.spec, n, got, c.want)
			}
		}
	}
	for _, bad := range []string{"failover?x=0", "failover?x=-1", "failover?down=1"} {
		if _, err := nemesis.Parse(bad); !errors.Is(err, nemesis.ErrFault) || !strings.Contains(err.Error(), bad[len("failover?"):][:1]) {
			t.Errorf("Parse(%q) = %v, want ErrFault naming the param", bad, err)
		}
	}
}
