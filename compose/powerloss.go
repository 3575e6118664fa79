package compose

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// PowerLoss cuts the node's power: its processes die at once (SIGKILL)
// and its disk keeps only what the server synced (see Durability); every
// write it had not fsynced is gone, as is the kernel's cache of it. It
// returns what was dropped. The node stays down: Start brings it back on
// what survived, which is the delayed restart when called later.
//
// The node must have been started with LazyFS. A Kill, by contrast, keeps
// everything the server wrote (the kernel still has it), synced or not.
func (n *Node) PowerLoss() (Unsynced, error) {
	if n.lazy == nil {
		return Unsynced{}, fmt.Errorf("compose: %s was started without LazyFS: a power loss cannot drop its unsynced writes", n.Name)
	}
	if err := n.Kill(); err != nil {
		return Unsynced{}, err
	}
	lost, err := n.lazy.powerLoss()
	if err != nil {
		return Unsynced{}, fmt.Errorf("compose: power loss of %s: %w", n.Name, err)
	}
	return lost, nil
}

// Unsynced reports what the node's server has written and not synced:
// what a power loss would drop now. It is zero for a node without LazyFS;
// the error is a placed node's filesystem daemon that did not answer.
func (n *Node) Unsynced() (Unsynced, error) {
	if n.lazy == nil {
		return Unsynced{}, nil
	}
	return n.lazy.pending()
}

// Writeback writes every unsynced change of the node's disk to it, as the
// kernel's writeback does within 30 s on a real machine: a power loss
// after it drops only what the server writes later. Start does it once
// the server is ready. It does nothing for a node without LazyFS.
func (n *Node) Writeback() error {
	if n.lazy == nil {
		return nil
	}
	return n.lazy.writebackAll()
}

// KillAll kills the nodes at once, as a crash of their machines that
// keeps their disks (and page caches) would: no node sees another die
// first. It waits for every one to exit.
func KillAll(nodes ...*Node) error {
	return each(nodes, (*Node).Kill)
}

// PowerLossAll cuts the power of the nodes at once: all die before any
// loses its unsynced writes (see Node.PowerLoss). It returns what each
// lost, in the order of nodes. They stay down; StartAll brings them back.
func PowerLossAll(nodes ...*Node) ([]Unsynced, error) {
	for _, n := range nodes {
		if n.lazy == nil {
			return nil, fmt.Errorf("compose: %s was started without LazyFS: a power loss cannot drop its unsynced writes", n.Name)
		}
	}
	if err := KillAll(nodes...); err != nil {
		return nil, err
	}
	lost := make([]Unsynced, len(nodes))
	err := each(nodes, func(n *Node) error {
		u, err := n.PowerLoss()
		for i, m := range nodes {
			if m == n {
				lost[i] = u
			}
		}
		return err
	})
	return lost, err
}

// StartAll starts the stopped nodes together and waits until each is
// ready (see Node.Start): members of a quorum that lost its majority
// become ready only once enough of them run, so they cannot be started
// one after another. A running node is left as it is.
//
// They are spawned at once too: an etcd member that lost its data is
// replaced through the others when it starts, which waits for them.
//
// The error joins each node's: one that wraps ErrExited is a server that
// refused to start, one that wraps ErrNotReady a server that was still
// starting when the wait ended.
func StartAll(ctx context.Context, nodes ...*Node) error {
	if err := each(nodes, func(n *Node) error { return n.spawn(ctx) }); err != nil {
		return err
	}
	if err := each(nodes, func(n *Node) error { return n.waitReady(ctx) }); err != nil {
		return err
	}
	return each(nodes, (*Node).settle)
}

// each runs f on every node at once and joins the errors.
func each(nodes []*Node, f func(*Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = f(n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
