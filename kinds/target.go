package kinds

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/nemesis"
)

// The servers compose starts, as the nemesis breaks them (nemesis.Target):
// a compose node is a nemesis.Node with every capability as it is, but a
// cluster's controls name compose's nodes in their signatures, so they
// are wrapped here, where both packages are known, and arrows point down:
// the nemesis imports no server package. (The nemesis's tests assert that
// compose's node and these wrappers implement its interfaces.)

// AsNodes returns nodes as a target holds them.
func AsNodes[N nemesis.Node](nodes []N) []nemesis.Node {
	out := make([]nemesis.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n
	}
	return out
}

// ComposeNode returns the compose node that n is, or an error naming n
// when it is not one: the controls wrapped here act on compose's nodes
// only.
func ComposeNode(n nemesis.Node) (*compose.Node, error) {
	c, ok := n.(*compose.Node)
	if !ok || c == nil {
		return nil, fmt.Errorf("kinds: %v is not a node compose started", n)
	}
	return c, nil
}

// ComposeNodes returns the compose nodes that nodes are.
func ComposeNodes(nodes []nemesis.Node) ([]*compose.Node, error) {
	out := make([]*compose.Node, len(nodes))
	for i, n := range nodes {
		c, err := ComposeNode(n)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// AsNode returns n as a nemesis.Node, nil when n is: a nil *compose.Node
// in an interface would not compare equal to nil.
func AsNode(n *compose.Node) nemesis.Node {
	if n == nil {
		return nil
	}
	return n
}

// composeLeader is a cluster of compose's nodes that finds its leader: a
// ZooKeeper ensemble, an etcd cluster, a Sentinel set.
type composeLeader interface {
	Leader(ctx context.Context) (*compose.Node, error)
}

// Leads returns l as the nemesis finds a leader.
func Leads(l composeLeader) nemesis.Leader { return leader{l} }

// leader is a composeLeader as a nemesis.Leader. It is comparable: two
// wrap the same cluster when they are equal.
type leader struct{ l composeLeader }

func (x leader) Leader(ctx context.Context) (nemesis.Node, error) {
	n, err := x.l.Leader(ctx)
	return AsNode(n), err
}

// composeMembers is a cluster of compose's nodes whose members can be cut
// apart: a ZooKeeper ensemble, an etcd cluster.
type composeMembers interface {
	Partition(groups ...[]*compose.Node) error
	HealPartition() error
	AwaitServing(ctx context.Context) error
	Isolated(ctx context.Context, n *compose.Node) error
}

// members is a composeMembers as nemesis.Members.
type members struct{ m composeMembers }

func (x members) Partition(groups ...[]nemesis.Node) error {
	gs := make([][]*compose.Node, len(groups))
	for i, g := range groups {
		var err error
		if gs[i], err = ComposeNodes(g); err != nil {
			return err
		}
	}
	return x.m.Partition(gs...)
}

func (x members) HealPartition() error { return x.m.HealPartition() }

func (x members) AwaitServing(ctx context.Context) error { return x.m.AwaitServing(ctx) }

func (x members) Isolated(ctx context.Context, n nemesis.Node) error {
	c, err := ComposeNode(n)
	if err != nil {
		return err
	}
	return x.m.Isolated(ctx, c)
}

// ClientNet is a client process's namespace on a peer network of this
// machine (compose.ClientNet) as a split view cuts it (nemesis.ClientNet).
// It is comparable: two wrap the same namespace when they are equal.
type ClientNet struct{ Net *compose.ClientNet }

// Addr is the client's address.
func (x ClientNet) Addr() netip.Addr { return x.Net.Addr() }

// Cut replaces the client's cut by one from exactly nodes.
func (x ClientNet) Cut(nodes ...nemesis.Node) error {
	cs, err := ComposeNodes(nodes)
	if err != nil {
		return err
	}
	return x.Net.Cut(cs...)
}

// Heal lifts the client's cut.
func (x ClientNet) Heal() error { return x.Net.Heal() }

// Reaches dials n from inside the client's namespace.
func (x ClientNet) Reaches(ctx context.Context, n nemesis.Node, d time.Duration) error {
	c, err := ComposeNode(n)
	if err != nil {
		return err
	}
	return x.Net.Reaches(ctx, c, d)
}
