package nemesis_test

import (
	"errors"
	"testing"

	"github.com/lockbench/lockbench/nemesis"
)

// TestSplitFits: split-view applies to a cluster of at least three nodes
// that client namespaces can join (Redlock's five, three quorum members),
// client-leader to one with a leader too; each lacking shape is told the
// first capability it lacks, in the words written once for it. Both run
// their clients as processes, each in a namespace of its own.
func TestSplitFits(t *testing.T) {
	redlock := nemesis.Shape{Nodes: 5, Caps: nemesis.Servers | nemesis.Minority | nemesis.ClientNets | nemesis.ClientQuorum}
	quorum := nemesis.Shape{Nodes: 3, Caps: nemesis.Servers | nemesis.Minority | nemesis.Leadership | nemesis.Election | nemesis.ClientNets}
	noNets := nemesis.Shape{Nodes: 5, Caps: nemesis.Servers | nemesis.Minority}
	for _, tc := range []struct {
		fault   string
		sh      nemesis.Shape
		missing nemesis.Capability // 0: it applies
	}{
		{"split-view", redlock, 0},
		{"split-view", quorum, 0},
		{"split-view", noNets, nemesis.ClientNets},
		{"client-leader", quorum, 0},
		{"client-leader", redlock, nemesis.Leadership},
	} {
		s, err := nemesis.Lookup(tc.fault)
		if err != nil {
			t.Fatal(err)
		}
		if !s.SplitNets || !s.Processes {
			t.Errorf("%s: SplitNets %v, Processes %v; want both", tc.fault, s.SplitNets, s.Processes)
		}
		err = s.Fits(tc.sh)
		var in *nemesis.Inapplicable
		switch {
		case tc.missing == 0 && err != nil:
			t.Errorf("%s on %v: %v", tc.fault, tc.sh.Caps, err)
		case tc.missing != 0 && (!errors.As(err, &in) || in.Missing != tc.missing || in.Reason != tc.missing.Takes()):
			t.Errorf("%s on %v: %v; want it to lack %v (%q)", tc.fault, tc.sh.Caps, err, tc.missing, tc.missing.Takes())
		}
	}
	for _, c := range []nemesis.Capability{nemesis.ClientNets, nemesis.ClientQuorum} {
		if c.Takes() == "" || c.String() == "" || !(nemesis.Capabilities()[len(nemesis.Capabilities())-1] >= c) {
			t.Errorf("capability %v: takes %q", c, c.Takes())
		}
	}
}
