package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/results"
)

// slots returns when each injection starts, from the case start: evenly
// spread over the middle of the case, each drawn at random within its
// slot so that a window of length and a gap after it fit. There are
// e.Injections of them, or fewer when they do not fit.
func (e Env) slots(length, gap time.Duration) []time.Duration {
	from, to := e.Spec.Duration/8, e.Spec.Duration-e.Spec.Duration/8
	k := e.Injections
	for k > 1 && (to-from)/time.Duration(k) < length+gap {
		k--
	}
	slot := (to - from) / time.Duration(k)
	out := make([]time.Duration, k)
	for i := range out {
		jitter := max(slot-length-gap, 0)
		out[i] = from + time.Duration(i)*slot + time.Duration(e.Rand.Int64N(int64(jitter)+1))
	}
	return out
}

// pick draws k of nodes at random (all of them when k ≥ len(nodes)).
func (e Env) pick(nodes []Node, k int) []Node {
	idx := e.Rand.Perm(len(nodes))
	var out []Node
	for _, i := range idx[:min(k, len(nodes))] {
		out = append(out, nodes[i])
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// minority draws a minority of the servers: (n−1)/2 of n, or the one
// server of a single-node backend.
func (e Env) minority() []Node {
	nodes := e.Target.Nodes
	return e.pick(nodes, max((len(nodes)-1)/2, 1))
}

// majority draws a majority of the servers: n/2+1 of n.
func (e Env) majority() []Node {
	nodes := e.Target.Nodes
	return e.pick(nodes, len(nodes)/2+1)
}

// describe records what an injection hits: node names, and whether the
// leader or a priority node is among them.
func (e Env) describe(ctx context.Context, nodes []Node) results.Target {
	t := results.Target{}
	leader, _ := e.Target.leader(ctx)
	for _, n := range nodes {
		t.Nodes = append(t.Nodes, n.String())
		if p, ok := n.(Placed); ok {
			if h, ok := p.Host().(*remote.SSH); ok {
				t.Hosts = append(t.Hosts, h.Name())
			}
		}
		t.Leader = t.Leader || (leader != nil && n == leader)
		for _, i := range e.Target.Priority {
			t.Priority = t.Priority || (i < len(e.Target.Nodes) && e.Target.Nodes[i] == n)
		}
	}
	return t
}

// names joins node names for a window's label.
func names(nodes []Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.String())
	}
	return strings.Join(s, ", ")
}

// eachErr applies op to every node at once and waits: faults on several
// nodes strike together, as in a rack power loss. It joins the errors.
func eachErr(nodes []Node, op func(Node) error) error {
	return eachIndexed(nodes, func(_ int, n Node) error { return op(n) })
}

// eachCap applies op to every node's capability C at once (eachErr): a
// node that lacks it is an error naming the capability c, which a
// scenario that requires c meets only on a target built wrong (Shape
// reads the same interfaces).
func eachCap[C any](nodes []Node, c Capability, op func(C) error) error {
	return eachErr(nodes, func(n Node) error {
		x, ok := n.(C)
		if !ok {
			return fmt.Errorf("%s lacks the capability %v", n, c)
		}
		return op(x)
	})
}

// killAll kills the nodes at once, as a crash of their machines that
// keeps their disks (and page caches) would: no node sees another die
// first. It waits for every one to exit.
func killAll(nodes []Node) error { return eachErr(nodes, Node.Kill) }

// startAll starts the stopped nodes together and waits until each is
// ready (Node.Start): members of a quorum that lost its majority become
// ready only once enough of them run, so they cannot be started one
// after another. A running node is left as it is. The error joins each
// node's.
func startAll(ctx context.Context, nodes []Node) error {
	return eachErr(nodes, func(n Node) error { return n.Start(ctx) })
}

// eachIndexed is eachErr with each node's index.
func eachIndexed(nodes []Node, op func(int, Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = op(i, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
