package compose

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Peers are the members of a quorum (an etcd cluster, a ZooKeeper
// ensemble) as a partition between them sees them: what a kind's cluster
// type partitions its members with. Members started with Netns are cut
// apart in their network's router; members placed on hosts (Spec.On),
// each on a host of its own, by rules on their hosts aimed at each
// other's peer ports (Placement.PeerPorts).
type Peers struct {
	what   string
	nodes  []*Node
	cutter peerCutter // nil without Netns or hosts
}

// NewPeers returns the peers nodes, started as l laid them out; what
// names their cluster in errors ("etcd cluster"). Close heals a partition
// between placed members that is still in force.
func (e *Env) NewPeers(what string, l Layout, nodes []*Node) (*Peers, error) {
	p := &Peers{what: what, nodes: nodes}
	switch {
	case l.net != nil:
		p.cutter = l.net
	case l.Places != nil:
		placed, err := e.newPlacedPeers(nodes)
		if err != nil {
			return nil, err
		}
		p.cutter = placed
	}
	return p, nil
}

// Partition cuts the members into groups that cannot reach each other:
// members of different groups lose every packet between them, in both
// directions and without an error (a silent drop, as a real partition),
// while members of one group talk as before and clients on this host
// still reach every member. Members named in no group form one more group
// together, so Partition(minority) splits the cluster into that minority
// and the rest. A Partition replaces the one in force; Heal lifts it. The
// members must have been started with Netns, or on hosts (Spec.On), each
// on a host of its own: rules on the members' hosts then cut their peer
// ports (see Placement.PeerPorts), and each cut is proven from the
// members' hosts before Partition returns.
//
// These are partitions between members (Raft's and its peers' traffic);
// Node.Partition cuts clients off from one member through its proxy.
func (p *Peers) Partition(groups ...[]*Node) error {
	if p.cutter == nil {
		return fmt.Errorf("compose: this %s was started neither with Netns nor on hosts: its members cannot be partitioned", p.what)
	}
	return p.cutter.partition(p.nodes, groups)
}

// Heal lifts the partition in force, if any: members reach each other
// again at once, but a TCP connection that lived through the cut carries
// data again only at its next retransmission, and TCP doubles the wait
// after each lost one (ZooKeeper's election doubles its own). So the
// longer the cut, the longer the recovery: AwaitServing waits for it.
func (p *Peers) Heal() error {
	if p.cutter == nil {
		return fmt.Errorf("compose: this %s was started neither with Netns nor on hosts: there is no partition to heal", p.what)
	}
	return p.cutter.heal()
}

// PartitionLeader cuts the member leader finds off from every other
// member (clients still reach it) and returns it.
func (p *Peers) PartitionLeader(ctx context.Context, leader func(context.Context) (*Node, error)) (*Node, error) {
	l, err := leader(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.Partition([]*Node{l}); err != nil {
		return nil, err
	}
	return l, nil
}

// AwaitServing waits until every running member is ready again (its
// NodeSpec.Ready), as after Heal or Resume: ctx bounds the wait, and each
// member may take ReadyTimeout.
func (p *Peers) AwaitServing(ctx context.Context) error {
	errs := make([]error, len(p.nodes))
	var wg sync.WaitGroup
	for i, n := range p.nodes {
		if n.Running() {
			wg.Go(func() { errs[i] = n.waitReady(ctx) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
