package compose

import "slices"

// A layout is where the servers of one cluster listen on this machine:
// each on 127.0.0.1 with free ports of its own, or, in network
// namespaces, each in a namespace of its own (a member of a peerNet) at
// an address of its own, on its software's well-known ports. Every kind
// of server lays its nodes out through it, so that a server started in a
// namespace is reached, cut off and cleaned up the same way whatever it
// runs.
type layout struct {
	net   *peerNet // nil on 127.0.0.1
	hosts []string // server i's address
	ports [][]int  // server i's ports, in the order of the well-known ones
	// places, when set, are the servers' placements on hosts.
	places []*Placement
}

// layOut lays out n servers with one port each per well-known number:
// those numbers in namespaces of their own when netns is set (a network
// that Close removes), free ports on 127.0.0.1 otherwise.
func (e *Env) layOut(n int, netns bool, wellKnown ...int) (layout, error) {
	l := layout{hosts: make([]string, n), ports: make([][]int, n)}
	if netns {
		net, err := e.peerNet(n)
		if err != nil {
			return layout{}, err
		}
		l.net = net
		for i := range n {
			l.hosts[i], l.ports[i] = net.addr(i).String(), slices.Clone(wellKnown)
		}
		return l, nil
	}
	k := len(wellKnown)
	free, err := freePorts(n * k)
	if err != nil {
		return layout{}, err
	}
	for i := range n {
		l.hosts[i], l.ports[i] = "127.0.0.1", free[i*k:(i+1)*k]
	}
	return l, nil
}

// place puts server i of the layout into s: its address and, in a
// namespace, its member of the network (which CutClients cuts), or its
// placement on a host.
func (l layout) place(s *spec, i int) {
	s.host = l.hosts[i]
	if l.places != nil {
		s.place = l.places[i]
	}
	if l.net != nil {
		s.net, s.member = l.net, i
	}
}

// layOutOn lays out servers of kind placed on hosts, one per placement:
// server i at its placement's address, on its port and then its peer
// ports (defaulting to peerPorts, the well-known ones after the client
// port), each placement checked first.
func layOutOn(kind string, on []Placement, peerPorts ...int) (layout, error) {
	l := layout{hosts: make([]string, len(on)), ports: make([][]int, len(on))}
	for i := range on {
		p := on[i]
		if err := p.check(kind); err != nil {
			return layout{}, err
		}
		p.PeerPorts = p.peerPorts(peerPorts...)
		l.places = append(l.places, &p)
		l.hosts[i], l.ports[i] = p.Addr.String(), append([]int{p.Port}, p.PeerPorts...)
	}
	return l, nil
}
