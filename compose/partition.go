package compose

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Partition cuts the cluster's members into groups that cannot reach each
// other: members of different groups lose every packet between them, in
// both directions and without an error (a silent drop, as a real
// partition), while members of one group talk as before and clients on
// this host still reach every member. Members named in no group form one
// more group together, so Partition(minority) splits the cluster into that
// minority and the rest. A Partition replaces the one in force;
// HealPartition lifts it. The cluster must have been started with
// Netns, or on hosts (Spec.On), each member on a host of its
// own: rules on the members' hosts then cut their peer ports (see
// Placement.PeerPorts), and each cut is proven from the members' hosts
// before Partition returns.
//
// These are partitions between members (Raft's and its peers' traffic);
// Node.Partition cuts clients off from one member through its proxy.
func (c *EtcdCluster) Partition(groups ...[]*Node) error {
	return partition("etcd cluster", c.cutter, c.Nodes, groups)
}

// HealPartition lifts the partition in force, if any: members reach each
// other again at once, but a TCP connection that lived through the cut
// carries data again only at its next retransmission, and TCP doubles the
// wait after each lost one (ZooKeeper's election doubles its own). So the
// longer the cut, the longer the recovery: measured here, every member
// served again about 3.4 s after a 4 s cut of the leader, 24 s after a
// 30 s one. AwaitServing waits for it.
func (c *EtcdCluster) HealPartition() error { return heal("etcd cluster", c.cutter) }

// PartitionLeader cuts the current leader off from every other member
// (clients still reach it) and returns it: the majority elects a new
// leader, and the old one can no longer commit anything.
func (c *EtcdCluster) PartitionLeader(ctx context.Context) (*Node, error) {
	return partitionLeader(ctx, c.Leader, c.Partition)
}

// AwaitServing waits until every running member serves clients (reports
// itself healthy), as after HealPartition or Resume: ctx bounds the wait,
// and each member may take ReadyTimeout.
func (c *EtcdCluster) AwaitServing(ctx context.Context) error { return awaitServing(ctx, c.Nodes) }

// Partition cuts the ensemble's servers into groups that cannot reach each
// other, as EtcdCluster.Partition does (see there); the ensemble must have
// been started with Netns or on hosts (Spec.On).
func (z *Ensemble) Partition(groups ...[]*Node) error {
	return partition("ZooKeeper ensemble", z.cutter, z.Nodes, groups)
}

// HealPartition lifts the partition in force, if any. As with etcd (see
// EtcdCluster.HealPartition), recovery takes longer after a longer cut:
// measured here, 0.45 s after a 4 s cut of the leader, 26 s after 30 s.
func (z *Ensemble) HealPartition() error { return heal("ZooKeeper ensemble", z.cutter) }

// PartitionLeader cuts the current leader off from every other server
// (clients still reach it) and returns it: it stops serving once it misses
// a quorum's acknowledgements, and the others elect a new leader.
func (z *Ensemble) PartitionLeader(ctx context.Context) (*Node, error) {
	return partitionLeader(ctx, z.Leader, z.Partition)
}

// AwaitServing waits until every running server serves clients (reports
// its mode), as after HealPartition or Resume: ctx bounds the wait, and
// each server may take ReadyTimeout.
func (z *Ensemble) AwaitServing(ctx context.Context) error { return awaitServing(ctx, z.Nodes) }

func partition(what string, c peerCutter, nodes []*Node, groups [][]*Node) error {
	if c == nil {
		return fmt.Errorf("compose: this %s was started neither with Netns nor on hosts: its members cannot be partitioned", what)
	}
	return c.partition(nodes, groups)
}

func heal(what string, c peerCutter) error {
	if c == nil {
		return fmt.Errorf("compose: this %s was started neither with Netns nor on hosts: there is no partition to heal", what)
	}
	return c.heal()
}

func partitionLeader(ctx context.Context, leader func(context.Context) (*Node, error), partition func(...[]*Node) error) (*Node, error) {
	l, err := leader(ctx)
	if err != nil {
		return nil, err
	}
	if err := partition([]*Node{l}); err != nil {
		return nil, err
	}
	return l, nil
}

func awaitServing(ctx context.Context, nodes []*Node) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n.Running() {
			wg.Go(func() { errs[i] = n.waitReady(ctx) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
