package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Split views: each client process sits in a network
// namespace of its own on the nodes' peer network (a ClientNet), and
// a fault cuts one client off from chosen nodes while every other client
// keeps them. A Redlock client counts a majority of the nodes it reaches:
// two clients that reach different majorities each count one.

// clientNets reports whether every node of t is a member of one peer
// network of this machine, which client namespaces can join.
func (t Target) clientNets() bool {
	if len(t.Nodes) == 0 || t.Sentinel != nil {
		return false
	}
	var net netip.Prefix
	for _, n := range t.Nodes {
		m, ok := n.(PeerMember)
		if !ok {
			return false
		}
		p := m.PeerNetwork()
		if !p.IsValid() || net.IsValid() && p != net {
			return false
		}
		net = p
	}
	return true
}

// clientNets are a case's client namespaces, by process number on the
// judge, as the runner hands them over (AddClientNet).
type clientNets struct {
	mu sync.Mutex
	m  map[int]ClientNet
}

// sorted returns the process numbers and their namespaces, in order.
func (c *clientNets) sorted() ([]int, []ClientNet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	procs := slices.Sorted(maps.Keys(c.m))
	nets := make([]ClientNet, len(procs))
	for i, p := range procs {
		nets[i] = c.m[p]
	}
	return procs, nets
}

// healAll lifts every client's cut.
func (c *clientNets) healAll() error {
	_, nets := c.sorted()
	var errs []error
	for _, n := range nets {
		errs = append(errs, n.Heal())
	}
	return errors.Join(errs...)
}

// AddClientNet gives n the network namespace client process (its number
// on the judge) runs in: the clients a split view may cut.
func (n *Nemesis) AddClientNet(process int, cn ClientNet) {
	n.nets.mu.Lock()
	defer n.nets.mu.Unlock()
	if n.nets.m == nil {
		n.nets.m = map[int]ClientNet{}
	}
	n.nets.m[process] = cn
}

// clientCut is one client's cut in a split view: which process, in which
// namespace, loses which nodes.
type clientCut struct {
	process int
	net     ClientNet
	nodes   []Node
}

// cutClients applies cuts, then proves them: each cut client fails to
// dial the nodes it lost (a timeout, as a dropped packet makes) and still
// reaches the others, and a client not cut (another cut's, or one left
// whole) still reaches every node lost. It returns the effect in words.
func cutClients(ctx context.Context, a attempt, cuts []clientCut, others []ClientNet, nodes []Node) (string, error) {
	a.struck()
	for _, c := range cuts {
		if err := c.net.Cut(c.nodes...); err != nil {
			return "", err
		}
	}
	var said []string
	for _, c := range cuts {
		for _, n := range nodes {
			err := c.net.Reaches(ctx, n, cutProof)
			switch lost := slices.Contains(c.nodes, n); {
			case lost && err == nil:
				return "", fmt.Errorf("client %d could still reach %s", c.process, n)
			case lost && !timedOut(err):
				return "", fmt.Errorf("client %d to %s: %w; want a timeout", c.process, n, err)
			case !lost && err != nil:
				return "", fmt.Errorf("client %d lost %s, which it was not cut from: %w", c.process, n, err)
			}
		}
		role := ""
		if c.process == a.holder {
			role = ", the holder"
		}
		said = append(said, fmt.Sprintf("client %d (%s%s) cut from %s (a connection timed out after %v), reaches %s",
			c.process, c.net.Addr(), role, names(c.nodes), cutProof, names(without(nodes, c.nodes))))
	}
	for _, c := range cuts {
		for _, o := range append(slices.Clone(others), otherNets(cuts, c)...) {
			for _, n := range c.nodes {
				if err := o.Reaches(ctx, n, time.Second); err != nil && !slices.ContainsFunc(cuts, func(x clientCut) bool {
					return x.net == o && slices.Contains(x.nodes, n)
				}) {
					return "", fmt.Errorf("client %s, not cut from %s, cannot reach it: %w", o.Addr(), n, err)
				}
			}
		}
	}
	if len(others) > 0 {
		said = append(said, fmt.Sprintf("%d other clients reach every node", len(others)))
	}
	return strings.Join(said, "; "), nil
}

// timedOut reports whether a dial failed by timing out, as a cut makes it.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// otherNets are the namespaces of cuts other than c.
func otherNets(cuts []clientCut, c clientCut) []ClientNet {
	var out []ClientNet
	for _, x := range cuts {
		if x.net != c.net {
			out = append(out, x.net)
		}
	}
	return out
}

// without returns nodes less those in cut.
func without(nodes, cut []Node) []Node {
	var out []Node
	for _, n := range nodes {
		if !slices.Contains(cut, n) {
			out = append(out, n)
		}
	}
	return out
}

// drawClients draws k distinct client namespaces of the case, the
// holder's first when it has one (a split that leaves the holder whole
// tests its lock less: the holder keeps every node), and returns the
// rest.
func (e Env) drawClients(k, holder int) ([]int, []ClientNet, []ClientNet, error) {
	procs, nets := e.nets.sorted()
	if len(nets) < k {
		return nil, nil, nil, fmt.Errorf("%d clients in namespaces of their own, want %d (the runner starts them so for this fault)",
			len(nets), k)
	}
	idx := e.Rand.Perm(len(nets))
	if h := slices.Index(procs, holder); h >= 0 {
		j := slices.Index(idx, h)
		idx[0], idx[j] = idx[j], idx[0]
	}
	var ps []int
	var picked, rest []ClientNet
	for j, i := range idx {
		if j < k {
			ps, picked = append(ps, procs[i]), append(picked, nets[i])
		} else {
			rest = append(rest, nets[i])
		}
	}
	return ps, picked, rest, nil
}

var splitView = &Scenario{
	Name: "split-view",
	span: cutSpan,
	Doc: "two clients, each in a network namespace of its own (the holder of the key the strike met first), are cut from " +
		"different minorities of the nodes for x leases, by default a lease (at least a second): " +
		"of 5 nodes client A loses {3,4} and client B {0,1}, so A sees {0,1,2} and B {2,3,4}, overlapping majorities " +
		"(of 3 members A loses member 2, B member 0); every other client, and this host, keep every node",
	Params:    cutParams,
	check:     checkCut,
	Needs:     Needs{Netns: true},
	Processes: true,
	SplitNets: true,
	Requires:  Minority | ClientNets,
	plan: func(e Env) plan {
		nodes := e.Target.Nodes
		k := (len(nodes) - 1) / 2
		lostA, lostB := nodes[len(nodes)-k:], nodes[:k]
		return e.drive(strike{
			label: "split between two clients", lasts: e.cut(), exclusion: true,
			pick: func(context.Context, int) ([]Node, error) {
				return append(slices.Clone(lostB), lostA...), nil
			},
			do: func(ctx context.Context, a attempt) (string, error) {
				ps, picked, rest, err := e.drawClients(2, a.holder)
				if err != nil {
					return "", err
				}
				return cutClients(ctx, a, []clientCut{{ps[0], picked[0], lostA}, {ps[1], picked[1], lostB}}, rest, nodes)
			},
			undo: func(context.Context, []Node) error { return e.nets.healAll() },
		})
	},
}

var clientLeader = &Scenario{
	Name: "client-leader",
	span: cutSpan,
	Doc: "one client, in a network namespace of its own, is cut from the leader alone (the ZooKeeper or etcd leader, a " +
		"Sentinel set's master) " +
		"for x leases, by default a lease (at least a second), while it reaches every other member and every other client reaches the leader",
	Params:    cutParams,
	check:     checkCut,
	Needs:     Needs{Netns: true},
	Processes: true,
	SplitNets: true,
	Requires:  Leadership | ClientNets,
	plan: func(e Env) plan {
		return e.drive(strike{
			label: "cut from one client", lasts: e.cut(), exclusion: true,
			pick: func(ctx context.Context, _ int) ([]Node, error) {
				l, err := e.Target.leader(ctx)
				if l == nil && err == nil {
					err = errors.New("no leader")
				}
				return []Node{l}, err
			},
			do: func(ctx context.Context, a attempt) (string, error) {
				// Any client: the holder (its session moving to another
				// member) or one asking through a member that lost the
				// leader are both the fault's case.
				ps, picked, rest, err := e.drawClients(1, -1)
				if err != nil {
					return "", err
				}
				return cutClients(ctx, a, []clientCut{{ps[0], picked[0], a.nodes}}, rest, e.Target.Nodes)
			},
			undo: func(context.Context, []Node) error { return e.nets.healAll() },
		})
	},
}
