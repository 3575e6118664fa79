package compose

import "slices"

// A Layout is where the servers of one cluster listen on this machine:
// each on 127.0.0.1 with free ports of its own, or, in network
// namespaces, each in a namespace of its own (a member of a peerNet) at
// an address of its own, on its software's well-known ports. Every kind
// of server lays its nodes out through it, so that a server started in a
// namespace is reached, cut off and cleaned up the same way whatever it
// runs.
type Layout struct {
	// Hosts are the servers' addresses: Hosts[i] is server i's.
	Hosts []string
	// Ports are the servers' ports: Ports[i] are server i's, in the order
	// of the well-known ones (LayOut), or its client port and then its
	// peer ports (LayOutOn).
	Ports [][]int
	// Places, when set, are the servers' placements on hosts.
	Places []*Placement

	net *peerNet // nil on 127.0.0.1
}

// LayOut lays out n servers with one port each per well-known number:
// those numbers in namespaces of their own when netns is set (a network
// that Close removes), free ports on 127.0.0.1 otherwise.
func (e *Env) LayOut(n int, netns bool, wellKnown ...int) (Layout, error) {
	l := Layout{Hosts: make([]string, n), Ports: make([][]int, n)}
	if netns {
		net, err := e.peerNet(n)
		if err != nil {
			return Layout{}, err
		}
		l.net = net
		for i := range n {
			l.Hosts[i], l.Ports[i] = net.addr(i).String(), slices.Clone(wellKnown)
		}
		return l, nil
	}
	k := len(wellKnown)
	free, err := freePorts(n * k)
	if err != nil {
		return Layout{}, err
	}
	for i := range n {
		l.Hosts[i], l.Ports[i] = "127.0.0.1", free[i*k:(i+1)*k]
	}
	return l, nil
}

// Place puts server i of the layout into s: its address and, in a
// namespace, its member of the network (which CutClients cuts), or its
// placement on a host.
func (l Layout) Place(s *NodeSpec, i int) {
	s.Host = l.Hosts[i]
	if l.Places != nil {
		s.place = l.Places[i]
	}
	if l.net != nil {
		s.net, s.member = l.net, i
	}
}

// LayOutOn lays out servers of kind placed on hosts, one per placement:
// server i at its placement's address, on its port and then its peer
// ports (defaulting to peerPorts, the well-known ones after the client
// port), each placement checked first.
func LayOutOn(kind string, on []Placement, peerPorts ...int) (Layout, error) {
	l := Layout{Hosts: make([]string, len(on)), Ports: make([][]int, len(on))}
	for i := range on {
		p := on[i]
		if err := p.Check(kind); err != nil {
			return Layout{}, err
		}
		p.PeerPorts = p.peerPorts(peerPorts...)
		l.Places = append(l.Places, &p)
		l.Hosts[i], l.Ports[i] = p.Addr.String(), append([]int{p.Port}, p.PeerPorts...)
	}
	return l, nil
}
