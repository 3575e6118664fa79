package compose

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"time"
)

// A ClientNet is a network namespace of one client process of its own,
// joined to the router of the network of a cluster started with Netns,
// at an address of its own:
//
//	client k ═ eth0 ── c<k> ── router ── m<i> ═ eth0 ── member i
//
// so that a cut can separate this client from a chosen set of the
// cluster's members while every other client, and the host, keep them:
// the split views (client A reaches members 0–2, client B
// members 2–4), which a cut between the host and a node (CutClients)
// cannot make, since every client of the host sits behind it. The client
// reaches the host (where the judge listens) at HostAddr through the
// router; a process runs in the namespace when started with Start.
//
// Cuts are blackhole policy rules in the router, from the client to each
// member cut and back, silent as every cut of compose (no reset, no
// ICMP). The namespace dies with the process that made it, as the peer
// network's do; Close frees it sooner.
type ClientNet struct {
	p    *peerNet
	ns   *netns
	slot int // the client's number on the network: its address and link
}

// clientSplitPref is the priority of the rules that cut one client off
// from members, beside the partitions between members and the cuts of
// members from the host.
const clientSplitPref = partitionPref + 2

// maxClients is how many client namespaces a peer network takes: their
// addresses count down from .253, the members' up from .10.
const maxClients = 100

// NewClientNet joins a new client namespace to the network of nodes, which
// must all be members of one peer network (of this machine). Close it, or
// let it die with the process.
func NewClientNet(nodes []*Node) (*ClientNet, error) {
	if len(nodes) == 0 {
		return nil, errors.New("compose: a client network needs the nodes it reaches")
	}
	var p *peerNet
	for _, n := range nodes {
		switch {
		case n == nil:
			return nil, errors.New("compose: client network: a nil node")
		case n.spec.place != nil || n.spec.net == nil:
			return nil, fmt.Errorf("compose: client network: %s is in no peer network of this machine (start it with Netns)", n.Name)
		case p == nil:
			p = n.spec.net
		case n.spec.net != p:
			return nil, fmt.Errorf("compose: client network: %s is in another peer network than %s", n.Name, nodes[0].Name)
		}
	}
	return p.addClient()
}

// PeerNetwork returns the prefix of the peer network of this machine the
// node is a member of, which a client namespace can join (NewClientNet),
// or the zero Prefix when it is in none (started without one, or placed
// on a host). Nodes whose prefixes are equal and valid share a network:
// one client namespace reaches them all.
func (n *Node) PeerNetwork() netip.Prefix {
	if n == nil || n.spec.place != nil || n.spec.net == nil {
		return netip.Prefix{}
	}
	return n.spec.net.prefix()
}

// addClient creates a client namespace and links it to the router.
func (p *peerNet) addClient() (_ *ClientNet, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("compose: client network: the cluster's network is closed")
	}
	if p.clients == nil {
		p.clients = map[int][]int{}
	}
	slot := -1
	for k := range maxClients {
		if _, taken := p.clients[k]; !taken && p.clientAddr(k).As4()[3] > byte(10+len(p.members)) {
			slot = k
			break
		}
	}
	if slot < 0 {
		return nil, fmt.Errorf("compose: client network %s: no client address left", p.prefix())
	}
	ns, err := newNetns()
	if err != nil {
		return nil, fmt.Errorf("compose: client network: %w", err)
	}
	defer func() {
		if err != nil {
			ns.close()
		}
	}()
	dev, router, addr := "c"+strconv.Itoa(slot), p.routerAddr().String(), p.clientAddr(slot).String()
	err = ip(p.router, []string{
		"link add " + dev + " type veth peer name eth0 netns /proc/self/fd/3",
		"addr add " + router + "/32 dev " + dev,
		"link set " + dev + " up",
		"route add " + addr + "/32 dev " + dev,
	}, ns.f)
	if err != nil {
		return nil, fmt.Errorf("compose: client network %s: %w", p.prefix(), err)
	}
	err = ip(ns, []string{
		"link set lo up",
		"addr add " + addr + "/32 dev eth0",
		"link set eth0 up",
		"route add " + router + "/32 dev eth0",
		"route add default via " + router + " dev eth0",
	})
	if err != nil {
		_ = ip(p.router, []string{"link del " + dev})
		return nil, fmt.Errorf("compose: client network %s: client %d: %w", p.prefix(), slot, err)
	}
	p.clients[slot] = nil
	return &ClientNet{p: p, ns: ns, slot: slot}, nil
}

// clientAddr is client k's address.
func (p *peerNet) clientAddr(k int) netip.Addr { return p.host4(byte(253 - k)) }

// Addr is the client's address, from which its connections come.
func (c *ClientNet) Addr() netip.Addr { return c.p.clientAddr(c.slot) }

// HostAddr is this host's address as the client reaches it: where a
// server of the host (the judge) must listen for the client to reach it.
func (c *ClientNet) HostAddr() netip.Addr { return c.p.hostAddr() }

// Start starts cmd inside the client's namespace.
func (c *ClientNet) Start(cmd *exec.Cmd) error { return c.ns.do(cmd.Start) }

// Cut replaces the client's cut by one from exactly nodes (none: heal):
// the client's packets to them and theirs to it are dropped, silently;
// every other client, and the host, still reach them.
func (c *ClientNet) Cut(nodes ...*Node) error {
	var members []int
	for _, n := range nodes {
		if n == nil || n.spec.net != c.p {
			return fmt.Errorf("compose: client cut: %v is not a member of the client's network", nodeName(n))
		}
		members = append(members, n.spec.member)
	}
	slices.Sort(members)
	return c.p.cutClient(c.slot, slices.Compact(members))
}

func nodeName(n *Node) string {
	if n == nil {
		return "a nil node"
	}
	return n.Name
}

// Heal lifts the client's cut.
func (c *ClientNet) Heal() error { return c.Cut() }

// cutClient sets client k's cut and applies every client's cut in force,
// in one batch.
func (p *peerNet) cutClient(k int, members []int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("compose: client cut: the network is closed")
	}
	if _, ok := p.clients[k]; !ok {
		return fmt.Errorf("compose: client cut: client %d is closed", k)
	}
	was := p.clients[k]
	p.clients[k] = members
	cmds := []string{fmt.Sprintf("rule flush pref %d", clientSplitPref)}
	for _, c := range slices.Sorted(maps.Keys(p.clients)) {
		client := p.clientAddr(c).String()
		for _, m := range p.clients[c] {
			member := p.addr(m).String()
			cmds = append(cmds,
				fmt.Sprintf("rule add from %s to %s blackhole pref %d", client, member, clientSplitPref),
				fmt.Sprintf("rule add from %s to %s blackhole pref %d", member, client, clientSplitPref))
		}
	}
	if err := ip(p.router, cmds); err != nil {
		p.clients[k] = was
		return fmt.Errorf("compose: client cut: %w", err)
	}
	return nil
}

// Reaches dials node from inside the client's namespace: nil when it
// connects within d; an error that says whether the dial timed out (as a
// cut makes it) or was answered otherwise. A nemesis proves a client cut
// with it: the cut client fails to reach the nodes cut, the others still
// reach them.
func (c *ClientNet) Reaches(ctx context.Context, node *Node, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.ns.do(func() error {
		var dialer net.Dialer
		conn, err := dialer.DialContext(ctx, "tcp", node.ServerAddr())
		if err != nil {
			return fmt.Errorf("compose: client %s to %s at %s: %w", c.Addr(), node.Name, node.ServerAddr(), err)
		}
		return conn.Close()
	})
}

// Close deletes the client's link (its router end takes the pair), drops
// its cut and frees its namespace once no process runs in it.
func (c *ClientNet) Close() error {
	c.p.mu.Lock()
	_, open := c.p.clients[c.slot]
	closed := c.p.closed
	c.p.mu.Unlock()
	if !open {
		return nil
	}
	var errs []error
	if !closed {
		errs = append(errs, c.Heal())
		errs = append(errs, ip(c.p.router, []string{"link del c" + strconv.Itoa(c.slot)}))
	}
	c.p.mu.Lock()
	delete(c.p.clients, c.slot)
	c.p.mu.Unlock()
	errs = append(errs, c.ns.close())
	return errors.Join(errs...)
}
