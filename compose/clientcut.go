package compose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// clientCutPref is the priority of the rules that cut members off from
// the host, beside (and independent of) the partition rules between
// members.
const clientCutPref = partitionPref + 1

// CutClients cuts the node off from this host, where its clients run:
// the router between them drops every packet either way, silently (no
// reset, no ICMP), as a cut cable does. Neither side gets a clean close:
// a client's connection stays open and its requests go unanswered until
// its own timeouts or keepalives give up, new connections time out, and
// the server sees its clients go silent until its keepalives (if any)
// give up on them. Heal with HealClients: connections that lived through
// the cut carry data again at TCP's next retransmission.
//
// The cut takes in the node's proxy, if it has one (the proxy runs on this
// host), but not the node's peers: members of a quorum still reach each
// other. The node must run in a network namespace: it must have been
// started with Netns. (Partition, through a proxy, keeps every TCP
// connection open.)
//
// A node placed on a host (Placement) is cut off from its client hosts
// instead: on its host its answers to them are dropped, on theirs what
// they send to its port, with blackhole rules aimed at those paths only
// (remote.CutPaths), so its other clients — the control node — and the
// host's other servers keep theirs.
func (n *Node) CutClients() error {
	if n.spec.place != nil {
		return n.cutPlaced(true)
	}
	if n.spec.net == nil {
		return fmt.Errorf("compose: %s runs in this host's network namespace: start it with Netns to cut its clients "+
			"off", n.Name)
	}
	return n.spec.net.cutClients(n.spec.member, true)
}

// HealClients lifts CutClients.
func (n *Node) HealClients() error {
	if n.spec.place != nil {
		return n.cutPlaced(false)
	}
	if n.spec.net == nil {
		return fmt.Errorf("compose: %s runs in this host's network namespace: there is no cut to heal", n.Name)
	}
	return n.spec.net.cutClients(n.spec.member, false)
}

// ClientsCut reports whether CutClients is in force for the node.
func (n *Node) ClientsCut() bool {
	if n.spec.place != nil {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.cut
	}
	if n.spec.net == nil {
		return false
	}
	n.spec.net.mu.Lock()
	defer n.spec.net.mu.Unlock()
	return slices.Contains(n.spec.net.cut, n.spec.member)
}

// Unreachable returns nil when a connection to the node's own address
// from this host fails within d by timing out, as it does when the node's
// clients are cut off, and an error saying what happened otherwise (it
// connected, or was refused: a clean answer a cut never gives). A nemesis
// proves a cut with it. A node placed on a host is tried from each of its
// client hosts, and must still be reachable from this machine.
func (n *Node) Unreachable(ctx context.Context, d time.Duration) error {
	if n.spec.place != nil {
		return n.unreachablePlaced(ctx, d)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "tcp", n.ServerAddr())
	if err == nil {
		c.Close()
		return fmt.Errorf("compose: %s is reachable at %s", n.Name, n.ServerAddr())
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return fmt.Errorf("compose: %s at %s: %w (a cut drops packets silently)", n.Name, n.ServerAddr(), err)
}

// cutClients cuts member i off from the host, or heals that cut, and
// applies every member's cut in force.
func (p *peerNet) cutClients(i int, cut bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("compose: cut clients: the network is closed")
	}
	was := slices.Clone(p.cut)
	p.cut = slices.DeleteFunc(p.cut, func(m int) bool { return m == i })
	if cut {
		p.cut = append(p.cut, i)
	}
	cmds := []string{fmt.Sprintf("rule flush pref %d", clientCutPref)}
	host := p.hostAddr().String()
	for _, m := range p.cut {
		member := p.addr(m).String()
		cmds = append(cmds,
			fmt.Sprintf("rule add from %s to %s blackhole pref %d", host, member, clientCutPref),
			fmt.Sprintf("rule add from %s to %s blackhole pref %d", member, host, clientCutPref))
	}
	if err := ip(p.router, cmds); err != nil {
		p.cut = was
		return fmt.Errorf("compose: cut clients: %w", err)
	}
	return nil
}
