package compose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/lockbench/lockbench/remote"
)

// checkPlaced says what is wrong with the placement of a Sentinel set on
// hosts (s resolved, its Redis nodes' count checked against On): what
// it excludes, and the sentinels' count it fixes.
func (o *SentinelOptions) checkPlaced(s Spec) error {
	var errs []error
	if s.On == nil {
		errs = append(errs, fmt.Errorf("%d sentinel placements (SentinelsOn) but no Redis placements (On): the Redis nodes of a set whose "+
			"sentinels are on hosts go on hosts too", len(o.SentinelsOn)))
	}
	switch {
	case len(o.SentinelsOn) == 0:
		errs = append(errs, errors.New("no sentinel placements (SentinelsOn): the sentinels of a set on hosts go on hosts too"))
	case o.Sentinels != 0 && o.Sentinels != len(o.SentinelsOn):
		errs = append(errs, fmt.Errorf("%d sentinels on %d placements: want one each", o.Sentinels, len(o.SentinelsOn)))
	}
	if s.Proxied || s.Netns || o.ProxiedReplication {
		errs = append(errs, errors.New("Proxied, Netns and ProxiedReplication apply to sets on this machine only"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("compose: Sentinel set on hosts: %w", err)
	}
	return nil
}

// sentinelsSide is SentinelSet.SentinelsSide for a set placed on hosts,
// or on this machine with its Redis nodes in namespaces (netns) or not.
func sentinelsSide(placed, netns bool) string {
	switch {
	case placed:
		return "the sentinels run on their own hosts (beside the Redis nodes, or apart), on the servers' side of a cut of the clients: they " +
			"keep seeing the master"
	case netns:
		return "the sentinels run on the clients' host, on the clients' side of a cut: they lose the master with them"
	}
	return "the sentinels run on the clients' host, beside the nodes"
}

// nodeFile is the path of file in the dir of the node s describes, on its
// host, known before the node is: the placement's dir, or its own.
func (e *Env) nodeFile(s spec, file string) string {
	switch {
	case s.place != nil:
		return path.Join(s.place.Dir, file)
	case s.dir != "":
		return filepath.Join(s.dir, file)
	}
	return filepath.Join(e.Dir, s.name, file)
}

// hostLink is the replication link of a replica placed on a host, from a
// master placed on another: rules on the replica's host drop what it
// sends to the master's port, rules on the master's host drop what the
// master answers it from that port (remote.CutPaths, the rules that cut
// a placed node's clients off). Rules on addresses and ports know no
// process: the sentinel beside the replica, which reaches the master's
// port from the same address, is held back with it; the clients, the
// control node and every other host keep their paths.
type hostLink struct {
	master, replica *Node

	mu  sync.Mutex
	cut bool
}

// newHostLink returns the link from master to replica, which e heals
// when it closes.
func (e *Env) newHostLink(master, replica *Node) *hostLink {
	l := &hostLink{master: master, replica: replica}
	e.mu.Lock()
	e.hostLinks = append(e.hostLinks, l)
	e.mu.Unlock()
	return l
}

// paths are the paths the link's cut drops: on the replica's host, to the
// master's port; on the master's, from it to the replica's address.
func (l *hostLink) paths() (toMaster, fromMaster remote.Path) {
	m, r := l.master.spec.place, l.replica.spec.place
	return remote.Path{Addr: m.Addr, DPort: uint16(m.Port)}, remote.Path{Addr: r.Addr, SPort: uint16(m.Port)}
}

// Partition holds the replica's replication back, and proves it: from
// the replica's host a connection to the master's port fails without a
// word (see tryFrom), while this machine, the control node, still
// reaches the master. A failed proof heals the cut again.
func (l *hostLink) Partition() error {
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
func (l *hostLink) prove(ctx context.Context) error {
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

// Heal lets the replication flow again.
func (l *hostLink) Heal() error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healLocked(ctx)
}

// healLocked lifts the link's cut, if any.
func (l *hostLink) healLocked(ctx context.Context) error {
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
