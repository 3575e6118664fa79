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

// peerCutter cuts the members of a cluster apart and heals them: a
// peerNet on this machine (rules in its router), placedPeers on hosts
// (rules on the members' hosts).
type peerCutter interface {
	partition(nodes []*Node, groups [][]*Node) error
	heal() error
}

// placedPeers cuts the members of a cluster placed on hosts (Placement)
// apart with the rules that cut a placed node's clients off
// (remote.CutPaths, blackhole rules of priority remote.CutPref): on each
// member's host, what it sends to the peer ports of the members of other
// groups, and what it answers them from its own peer ports. Only the
// members' peer traffic goes: their clients, the control node and the
// hosts' other servers keep their paths. Each cut is proven from the
// members themselves before Partition returns: a cut member no longer
// reaches the peer ports of the members it is cut from, and the control
// node still reaches every member.
type placedPeers struct {
	nodes []*Node

	mu  sync.Mutex
	cut map[*Node][]remote.Path // the paths cut on each member's host
}

// newPlacedPeers returns the cutter of members nodes, each placed on a
// host, which e heals when it closes.
func (e *Env) newPlacedPeers(nodes []*Node) (*placedPeers, error) {
	p := &placedPeers{nodes: nodes, cut: map[*Node][]remote.Path{}}
	return p, e.Cleanup(p.heal)
}

// partition replaces the partition in force by one that separates the
// groups, proves it, and heals it again if the proof fails.
func (p *placedPeers) partition(nodes []*Node, groups [][]*Node) error {
	group, err := groupsOf(nodes, groups)
	if err != nil {
		return err
	}
	cuts := make(map[*Node][]remote.Path, len(nodes))
	for i, a := range nodes {
		pa := a.spec.place
		for j, b := range nodes {
			pb := b.spec.place
			if group[i] == group[j] {
				continue
			}
			if pa.Addr == pb.Addr {
				return fmt.Errorf("compose: partition: %s and %s share the address %s of %s: members are cut apart by rules on their hosts, so each "+
					"needs a host of its own", a.Name, b.Name, pa.Addr, pa.Host.Name())
			}
			for _, q := range pb.PeerPorts {
				cuts[a] = append(cuts[a], remote.Path{Addr: pb.Addr, DPort: uint16(q)})
			}
			for _, q := range pa.PeerPorts {
				cuts[a] = append(cuts[a], remote.Path{Addr: pb.Addr, SPort: uint16(q)})
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := p.healLocked(ctx); err != nil {
		return err
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		paths := cuts[n]
		if len(paths) == 0 {
			continue
		}
		// Recorded first: a cut that failed part-way is healed too.
		p.cut[n] = paths
		wg.Go(func() { errs[i] = remote.CutPaths(ctx, n.host, paths...) })
	}
	wg.Wait()
	err = errors.Join(errs...)
	if err == nil {
		err = p.prove(ctx, nodes, group)
	}
	if err != nil {
		return fmt.Errorf("compose: partition: %w", errors.Join(err, p.healLocked(ctx)))
	}
	return nil
}

// prove tries, from the host of each member, every peer port of each
// member of another group (each must be cut: see tryFrom), and the client
// port of every member from this machine, the control node (each must
// answer).
func (p *placedPeers) prove(ctx context.Context, nodes []*Node, group []int) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for i, a := range nodes {
		from := Peer{Host: a.host, Addr: a.spec.place.Addr}
		for j, b := range nodes {
			if group[i] == group[j] {
				continue
			}
			for _, q := range b.spec.place.PeerPorts {
				wg.Go(func() {
					if err := tryFrom(ctx, from, b.Name+"'s peer port", b.spec.place.Addr, q, "2"); err != nil {
						fail(fmt.Errorf("%s still reaches %s: %w", a.Name, b.Name, err))
					}
				})
			}
		}
		if !a.Running() {
			continue
		}
		wg.Go(func() {
			var d net.Dialer
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			c, err := d.DialContext(dctx, "tcp", a.ServerAddr())
			if err != nil {
				fail(fmt.Errorf("the control node lost %s too (%w): the cut took more than the members' peer ports", a.Name, err))
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// heal lifts the partition in force, if any.
func (p *placedPeers) heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return p.healLocked(ctx)
}

// healLocked lifts the cuts recorded on each member's host, forgetting
// those it lifted.
func (p *placedPeers) healLocked(ctx context.Context) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	nodes := make([]*Node, 0, len(p.cut))
	for n := range p.cut {
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		paths := p.cut[n]
		wg.Go(func() {
			err := remote.HealPaths(ctx, n.host, paths...)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("compose: heal the partition of %s: %w", n.Name, err))
				return
			}
			delete(p.cut, n)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
