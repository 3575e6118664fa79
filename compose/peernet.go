package compose

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lockbench/lockbench/internal/claims"
)

// A peerNet is the network of a cluster started with Netns: each
// member in a network namespace of its own, joined by a veth pair to a
// router namespace that forwards between the members and to the host,
// where clients (and the members' client proxies) run:
//
//	host ── lockbench<slot> ═ uplink ── router ── m<i> ═ eth0 ── member i
//
// Its addresses are one /24 of 198.18.0.0/15 (RFC 2544's range for
// benchmark networks, which no real network uses): the router .1, the host
// .254, member i .10+i. A partition is a pair of `blackhole` policy rules
// in the router for each pair of members it separates: the router drops
// their packets without a word (no ICMP, no reset), in both directions, as
// a cut cable would, while both stay reachable from the host. Heal deletes
// the rules.
//
// The slot (which /24, and the host link's name) is claimed in the claims
// file that ports use, so concurrent processes never share one; the
// namespaces die with this process (see netns), taking the veth pairs,
// the host link and its routes with them. A host link whose slot nobody
// claims is a leftover, and the next peerNet deletes it (sweepPeerNets).
type peerNet struct {
	slot    int
	router  *netns
	members []*netns

	mu     sync.Mutex
	closed bool
	cut    []int // members cut off from the host (CutClients)
	// clients are the client namespaces on the network (ClientNet), by
	// their number, each with the members it is cut from.
	clients map[int][]int
}

const (
	// peerSlots is how many slots peer networks may take, from the
	// bottom of 198.18.0.0/15 (simulated hosts take theirs from the top).
	peerSlots = claims.Slots - claims.LabSlots
	// peerLinkPrefix names the host's end of each peerNet's uplink:
	// lockbench<slot>.
	peerLinkPrefix = "lockbench"
	// partitionPref is the priority of the partition rules, ahead of the
	// main table's 32766.
	partitionPref = 100
)

var (
	peerSlotsMu sync.Mutex
	peerSlotsIn = map[int]bool{} // slots this process holds
)

// maxPeers is how many members a peer network can hold: .10 to .253.
const maxPeers = 244

// newPeerNet builds a network for n members.
func newPeerNet(n int) (_ *peerNet, err error) {
	if n < 1 || n > maxPeers {
		return nil, fmt.Errorf("compose: a peer network of %d members: want 1 to %d", n, maxPeers)
	}
	if err := PeerNetworkAvailable(); err != nil {
		return nil, err
	}
	sweepPeerNets()
	p := &peerNet{slot: -1}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.close())
		}
	}()
	if p.slot, err = claimPeerSlot(); err != nil {
		return nil, err
	}
	if p.router, err = newNetns(); err != nil {
		return nil, fmt.Errorf("compose: peer network router: %w", err)
	}
	for i := range n {
		ns, err := newNetns()
		if err != nil {
			return nil, fmt.Errorf("compose: peer network member %d: %w", i, err)
		}
		p.members = append(p.members, ns)
	}
	if err := p.build(); err != nil {
		return nil, fmt.Errorf("compose: peer network %s: %w", p.prefix(), err)
	}
	return p, nil
}

// prefix is the network's /24.
func (p *peerNet) prefix() netip.Prefix { return claims.Prefix(p.slot) }

func (p *peerNet) host4(last byte) netip.Addr { return claims.Addr(p.slot, last) }

func (p *peerNet) routerAddr() netip.Addr { return p.host4(1) }
func (p *peerNet) hostAddr() netip.Addr   { return p.host4(254) }

// addr is member i's address, where it listens and its peers and clients
// reach it.
func (p *peerNet) addr(i int) netip.Addr { return p.host4(byte(10 + i)) }

// link is the name of the host's end of the uplink.
func (p *peerNet) link() string { return peerLinkPrefix + strconv.Itoa(p.slot) }

// build creates the links, addresses and routes: the uplink first (both
// ends at once, so the host end cannot exist without the router's), then
// the router with a link to each member, then each member's side, then
// the host's route to the network.
func (p *peerNet) build() error {
	link, router, host := p.link(), p.routerAddr(), p.hostAddr()
	if err := ip(nil, []string{"link add " + link + " type veth peer name uplink netns /proc/self/fd/3"}, p.router.f); err != nil {
		return err
	}
	cmds := []string{
		"link set lo up",
		"addr add " + router.String() + "/32 dev uplink",
		"link set uplink up",
		"route add " + host.String() + "/32 dev uplink",
	}
	pass := make([]*os.File, len(p.members))
	for i, m := range p.members {
		dev := "m" + strconv.Itoa(i)
		cmds = append(cmds,
			fmt.Sprintf("link add %s type veth peer name eth0 netns /proc/self/fd/%d", dev, 3+i),
			"addr add "+router.String()+"/32 dev "+dev,
			"link set "+dev+" up",
			"route add "+p.addr(i).String()+"/32 dev "+dev)
		pass[i] = m.f
	}
	if err := ip(p.router, cmds, pass...); err != nil {
		return err
	}
	// Forwarding is a setting of each namespace: turning it on in the
	// router leaves the host's as it is.
	err := p.router.do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
	})
	if err != nil {
		return fmt.Errorf("router ip_forward: %w", err)
	}
	for i, m := range p.members {
		err := ip(m, []string{
			"link set lo up",
			"addr add " + p.addr(i).String() + "/32 dev eth0",
			"link set eth0 up",
			"route add " + router.String() + "/32 dev eth0",
			"route add default via " + router.String() + " dev eth0",
		})
		if err != nil {
			return fmt.Errorf("member %d: %w", i, err)
		}
	}
	return ip(nil, []string{
		"addr add " + host.String() + "/32 dev " + link,
		"link set " + link + " up",
		"route add " + router.String() + "/32 dev " + link,
		"route add " + p.prefix().String() + " via " + router.String() + " dev " + link + " src " + host.String(),
	})
}

// partition replaces the partition in force by one that separates the
// groups (of nodes, the cluster's members being nodes): members of
// different groups cannot reach each other, members of one group can, and
// members in no group form one more group together.
func (p *peerNet) partition(nodes []*Node, groups [][]*Node) error {
	group, err := groupsOf(nodes, groups)
	if err != nil {
		return err
	}
	var cut []string
	for i := range nodes {
		for j := range nodes {
			if group[i] != group[j] {
				cut = append(cut, "from "+p.addr(i).String()+" to "+p.addr(j).String())
			}
		}
	}
	return p.apply(cut)
}

// groupsOf numbers the group of each of nodes in a partition into groups:
// 1 and up for the groups named, 0 for the members in none. It is an
// error unless the partition separates some of them.
func groupsOf(nodes []*Node, groups [][]*Node) ([]int, error) {
	group := make([]int, len(nodes)) // 0: the rest
	for g, members := range groups {
		for _, m := range members {
			i := slices.Index(nodes, m)
			switch {
			case m == nil:
				return nil, fmt.Errorf("compose: partition: group %d has a nil node", g+1)
			case i < 0:
				return nil, fmt.Errorf("compose: partition: %s is not a member of this cluster", m.Name)
			case group[i] != 0:
				return nil, fmt.Errorf("compose: partition: %s is in two groups", m.Name)
			}
			group[i] = g + 1
		}
	}
	for i := range group {
		if group[i] != group[0] {
			return group, nil
		}
	}
	return nil, fmt.Errorf("compose: partition: every member is in one group, nothing would be cut")
}

// heal lifts the partition in force, if any.
func (p *peerNet) heal() error { return p.apply(nil) }

// apply replaces the partition rules in force (whatever they are, even
// after a batch that failed part-way) by those of cut, in one batch.
func (p *peerNet) apply(cut []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("compose: partition: the cluster's network is closed")
	}
	cmds := []string{fmt.Sprintf("rule flush pref %d", partitionPref)}
	for _, sel := range cut {
		cmds = append(cmds, fmt.Sprintf("rule add %s blackhole pref %d", sel, partitionPref))
	}
	if err := ip(p.router, cmds); err != nil {
		return fmt.Errorf("compose: partition: %w", err)
	}
	return nil
}

// close deletes the host's link (and so the uplink), lets the kernel free
// the namespaces, and gives up the slot. Call it after the members have
// been killed.
func (p *peerNet) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	var errs []error
	if p.router != nil {
		if err := deleteLink(p.link()); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, p.router.close())
	}
	for _, m := range p.members {
		errs = append(errs, m.close())
	}
	if p.slot >= 0 {
		releasePeerSlot(p.slot)
	}
	return errors.Join(errs...)
}

// deleteLink deletes a link of the host (both ends of a veth pair go), and
// is content when it is already gone.
func deleteLink(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	err := ip(nil, []string{"link del " + name})
	if err != nil {
		if _, lookErr := net.InterfaceByName(name); lookErr != nil {
			return nil // deleted meanwhile (its namespace was freed)
		}
		return fmt.Errorf("compose: delete link %s: %w", name, err)
	}
	return nil
}

// claimPeerSlot claims a slot no process holds, across processes through
// the claims file (so it needs it) and in this one through a map.
func claimPeerSlot() (int, error) {
	if err := claims.Open(); err != nil {
		return 0, fmt.Errorf("compose: Netns needs the claims file to keep concurrent runs' networks apart: %w", err)
	}
	peerSlotsMu.Lock()
	defer peerSlotsMu.Unlock()
	for s := range peerSlots {
		if peerSlotsIn[s] {
			continue
		}
		if ok, _ := claims.Slot(s); !ok {
			continue
		}
		// A leftover of a process that died mid-way would make the link
		// name taken: this slot's links are ours to delete now.
		if err := deleteLink(peerLinkPrefix + strconv.Itoa(s)); err != nil {
			claims.ReleaseSlot(s)
			return 0, err
		}
		peerSlotsIn[s] = true
		return s, nil
	}
	return 0, fmt.Errorf("compose: every one of the %d peer networks of 198.18.0.0/15 is in use", peerSlots)
}

func releasePeerSlot(s int) {
	peerSlotsMu.Lock()
	defer peerSlotsMu.Unlock()
	delete(peerSlotsIn, s)
	claims.ReleaseSlot(s)
}

// sweepPeerNets deletes the host links of peer networks whose slot no
// living process claims: what a run left behind if its namespaces outlived
// it. The kernel normally frees them with the process, so this finds
// nothing; it is the backstop. It returns the links it deleted.
func sweepPeerNets() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	if claims.Open() != nil {
		return nil
	}
	var swept []string
	for _, ifc := range ifs {
		s, err := strconv.Atoi(strings.TrimPrefix(ifc.Name, peerLinkPrefix))
		if !strings.HasPrefix(ifc.Name, peerLinkPrefix) || err != nil || s < 0 || s >= peerSlots {
			continue
		}
		peerSlotsMu.Lock()
		if ok, _ := claims.Slot(s); ok && !peerSlotsIn[s] {
			if deleteLink(ifc.Name) == nil {
				swept = append(swept, ifc.Name)
			}
			claims.ReleaseSlot(s)
		}
		peerSlotsMu.Unlock()
	}
	return swept
}
