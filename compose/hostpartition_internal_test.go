package compose

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/remote"
)

// TestPlacedPeersRefuse checks what a partition of members on hosts
// refuses before it touches any host: members of different groups that
// share an address (rules on a host cannot cut its own traffic apart),
// and a partition that separates nobody.
func TestPlacedPeersRefuse(t *testing.T) {
	h := remote.Local{}
	node := func(name, addr string) *Node {
		a := netip.MustParseAddr(addr)
		return &Node{Name: name, host: h, spec: NodeSpec{place: &Placement{Host: h, Addr: a, Port: 2379, PeerPorts: []int{2380}}}}
	}
	nodes := []*Node{node("m0", "192.0.2.1"), node("m1", "192.0.2.1"), node("m2", "192.0.2.2")}
	for _, tc := range []struct {
		name   string
		groups [][]*Node
		want   string
	}{
		{"shared host", [][]*Node{{nodes[0]}}, "share the address 192.0.2.1"},
		{"one group", [][]*Node{nodes}, "nothing would be cut"},
		{"stranger", [][]*Node{{node("x", "192.0.2.9")}}, "not a member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &placedPeers{nodes: nodes, cut: map[*Node][]remote.Path{}}
			err := p.partition(nodes, tc.groups)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("partition: %v, want an error saying %q", err, tc.want)
			}
			if len(p.cut) > 0 {
				t.Errorf("cuts recorded after a refusal: %v", p.cut)
			}
		})
	}
}

// TestPeerPorts checks that a placement's peer ports fill the kind's
// standard ones where it names none (or 0), and that ports beyond the
// kind's are ignored.
func TestPeerPorts(t *testing.T) {
	for _, tc := range []struct {
		given, def, want []int
	}{
		{nil, []int{2888, 3888}, []int{2888, 3888}},
		{[]int{2889}, []int{2888, 3888}, []int{2889, 3888}},
		{[]int{0, 3889}, []int{2888, 3888}, []int{2888, 3889}},
		{[]int{2381, 9999}, []int{2380}, []int{2381}},
	} {
		p := Placement{PeerPorts: tc.given}
		if got := p.peerPorts(tc.def...); !slices.Equal(got, tc.want) {
			t.Errorf("PeerPorts %v, standard %v: %v, want %v", tc.given, tc.def, got, tc.want)
		}
	}
}
