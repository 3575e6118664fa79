package compose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/lockbench/lockbench/remote"
)

// A HostLink is the path from a node placed on a host (a replica) to the
// port of a node placed on another (its master), which a fault holds back
// (a replication stream: the write a failover then loses): rules on the
// replica's host drop what it sends to the master's port, rules on the
// master's host drop what the master answers it from that port
// (remote.CutPaths, the rules that cut a placed node's clients off).
// Rules on addresses and ports know no process: whatever else on the
// replica's address reaches the master's port (a sentinel beside it) is
// held back with it; the clients, the control node and every other host
// keep their paths.
type HostLink struct {
	master, replica *Node

	mu  sync.Mutex
	cut bool
}

// NewHostLink returns the link from master to replica, both placed on
// hosts, which e heals when it closes.
func (e *Env) NewHostLink(master, replica *Node) (*HostLink, error) {
	if master.spec.place == nil || replica.spec.place == nil {
		return nil, fmt.Errorf("compose: link %s → %s: both must be placed on hosts", master.Name, replica.Name)
	}
	l := &HostLink{master: master, replica: replica}
	return l, e.Cleanup(l.Heal)
}

// paths are the paths the link's cut drops: on the replica's host, to the
// master's port; on the master's, from it to the replica's address.
func (l *HostLink) paths() (toMaster, fromMaster remote.Path) {
	m, r := l.master.spec.place, l.replica.spec.place
	return remote.Path{Addr: m.Addr, DPort: uint16(m.Port)}, remote.Path{Addr: r.Addr, SPort: uint16(m.Port)}
}

// Partition holds the replica's stream back, and proves it: from
// the replica's host a connection to the master's port fails without a
// word (see tryFrom), while this machine, the control node, still
// reaches the master. A failed proof heals the cut again.
func (l *HostLink) Partition() error {
	m, r := l.master.spec.place, l.replica.spec.place
	if m.Addr == r.Addr {
		return fmt.Errorf("compose: replication link %s → %s: both at %s; rules on addresses need a host "+
			"each", l.master.Name, l.replica.Name, m.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true // recorded first: a cut that failed part-way is healed too
	to, from := l.paths()
	var errTo, errFrom error
	var wg sync.WaitGroup
	wg.Go(func() { errTo = remote.CutPaths(ctx, l.replica.host, to) })
	wg.Go(func() { errFrom = remote.CutPaths(ctx, l.master.host, from) })
	wg.Wait()
	err := errors.Join(errTo, errFrom)
	if err == nil {
		err = l.prove(ctx)
	}
	if err != nil {
		return fmt.Errorf("compose: cut the replication of %s: %w", l.replica.Name, errors.Join(err, l.healLocked(ctx)))
	}
	return nil
}

// prove checks a cut link from both ends, for Partition.
func (l *HostLink) prove(ctx context.Context) error {
	m, r := l.master.spec.place, l.replica.spec.place
	err := tryFrom(ctx, Peer{Host: l.replica.host, Addr: r.Addr}, l.master.Name, m.Addr, m.Port, "2")
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c, derr := d.DialContext(dctx, "tcp", l.master.ServerAddr()); derr != nil {
		err = errors.Join(err, fmt.Errorf("the control node lost %s too (%w): the cut took more than the replication", l.master.Name, derr))
	} else {
		c.Close()
	}
	return err
}

// Heal lets the stream flow again.
func (l *HostLink) Heal() error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healLocked(ctx)
}

// healLocked lifts the link's cut, if any.
func (l *HostLink) healLocked(ctx context.Context) error {
	if !l.cut {
		return nil
	}
	to, from := l.paths()
	err := errors.Join(remote.HealPaths(ctx, l.replica.host, to), remote.HealPaths(ctx, l.master.host, from))
	if err != nil {
		return fmt.Errorf("compose: heal the replication of %s: %w", l.replica.Name, err)
	}
	l.cut = false
	return nil
}
