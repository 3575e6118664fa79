package compose

import (
	"fmt"
	"strings"
)

// Spec is what every kind of server shares: how many nodes hold data,
// when they fsync, the fault mechanisms they start with and where they
// run. Each kind's package (under kinds/) starts its servers from a Spec
// beside options of its own kind, checked first by Spec.Resolve against
// the kind's Rules. A mechanism a kind cannot start with is an error
// naming it, never ignored; what a mechanism means for one kind in
// particular is said at that kind's options.
type Spec struct {
	// Nodes is how many servers hold data (a kind's Rules bound it). 0
	// means len(On) when On is set, else the kind's default, if it has
	// one (Rules.Default).
	Nodes int
	// Durability is when the nodes fsync (see Durability for each kind's
	// settings); "" is the kind's default (Rules.Durability). A profile
	// the kind has no setting for is an error wrapping ErrNoDurability.
	Durability Durability
	// LazyFS puts each node's dir on a lazy filesystem, so that
	// Node.PowerLoss drops what the node did not fsync. Here it needs root
	// and /dev/fuse (LazyFSAvailable); on a host, the lazyfs daemon of
	// Placement.Lockbench serves it.
	LazyFS bool
	// FakeClock runs each node under compose's clock preload, so that
	// Node.JumpClock and Node.SetClockRate move its wall clock. It needs a
	// C compiler on the node's host (Programs.CC) or a prebuilt preload
	// (Placement.ClockPreload), and a server that reads its clock through
	// libc: etcd, a Go program, does not.
	FakeClock bool
	// Proxied starts each node behind a Proxy on this machine, so that it
	// can be cut off from, or slowed for, its clients (Node.Partition,
	// Node.Delay). A placed node's proxy is its Placement's Proxy instead.
	Proxied bool
	// Netns starts each node in a network namespace of its own, at an
	// address of its own on its software's standard ports, reachable from
	// this host by routes: Node.CutClients then cuts its clients off
	// silently, as a partition does, and the members of a quorum can be
	// cut off from each other (Peers.Partition) while clients still reach
	// every one. It needs root and the ip
	// command: see PeerNetworkAvailable.
	Netns bool
	// On, when set, places the nodes on hosts, one Placement each (see
	// Placement); nil starts them on this machine. Proxied and Netns are
	// for nodes on this machine: placed nodes are cut off by rules on
	// their hosts (remote.CutPaths), and the members of a quorum each on a
	// host of its own are partitioned the same way.
	On []Placement
}

// Rules are what a kind of server accepts of a Spec: Spec.Resolve checks
// a Spec against them, so that every kind checks the mechanisms it shares
// with the others the same way.
type Rules struct {
	// Nodes names the kind's data nodes in errors: "etcd members".
	Nodes string
	// Min and Max bound Spec.Nodes (Max 0: no bound); Default is
	// Spec.Nodes when it is 0 and nothing is placed (0: the caller must
	// say).
	Min, Max, Default int
	// Odd asks for an odd number of nodes, for a majority to elect.
	Odd bool
	// Durability is the kind's default profile; NoPeriodic, when set,
	// says why the kind has no periodic one.
	Durability Durability
	NoPeriodic string
	// NoFakeClock, when set, says why the kind cannot run under the clock
	// preload.
	NoFakeClock string
}

// Resolve checks s for a kind of server and returns it with Nodes and
// Durability filled in: an error names the count, profile or mechanism the
// kind cannot start with.
func (s Spec) Resolve(k Rules) (Spec, error) {
	if s.Nodes == 0 {
		s.Nodes = k.Default
		if s.On != nil {
			s.Nodes = len(s.On)
		}
	}
	n := s.Nodes
	switch {
	case k.Odd && (n < k.Min || n%2 == 0):
		return s, fmt.Errorf("compose: %d %s: want an odd number, at least %d", n, k.Nodes, k.Min)
	case n < k.Min:
		return s, fmt.Errorf("compose: %d %s: want at least %d", n, k.Nodes, k.Min)
	case k.Max > 0 && n > k.Max:
		return s, fmt.Errorf("compose: %d %s: want at most %d", n, k.Nodes, k.Max)
	case s.On != nil && len(s.On) != n:
		return s, fmt.Errorf("compose: %d %s on %d placements: want one each", n, k.Nodes, len(s.On))
	}
	d, err := durability(s.Durability, k.Durability)
	if err != nil {
		return s, err
	}
	if d == DurabilityPeriodic && k.NoPeriodic != "" {
		return s, fmt.Errorf("compose: %s: no periodic durability: %s: %w", k.Nodes, k.NoPeriodic, ErrNoDurability)
	}
	s.Durability = d
	if s.FakeClock && k.NoFakeClock != "" {
		return s, fmt.Errorf("compose: %s with FakeClock: %s", k.Nodes, k.NoFakeClock)
	}
	if s.On != nil {
		var here []string
		if s.Proxied {
			here = append(here, "Proxied")
		}
		if s.Netns {
			here = append(here, "Netns")
		}
		if here != nil {
			return s, fmt.Errorf("compose: %s placed on hosts with %s: Proxied and Netns apply to nodes on this machine only (a placed "+
				"node's proxy is its Placement's Proxy)", k.Nodes, strings.Join(here, " and "))
		}
	}
	if s.Netns && s.On == nil {
		if err := PeerNetworkAvailable(); err != nil {
			return s, err
		}
	}
	return s, nil
}
