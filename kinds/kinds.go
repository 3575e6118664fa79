// Package kinds is the registry of the server kinds lockbench starts for
// its backends (Redis, Sentinel sets, ZooKeeper, etcd, PostgreSQL): each
// kind's package registers, in an init function, one Kind keyed by
// backends.Kind — what a cluster of it offers the faults, and why it
// lacks the rest — as go-ycsb's drivers register themselves. The runner
// reads it and branches on no kind's name. Import
// github.com/lockbench/lockbench/kinds/all to register every kind.
package kinds

import (
	"fmt"
	"slices"
	"sync"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/nemesis"
)

// Kind is one server kind as its package registers it.
type Kind struct {
	// Name is the kind the backends' descriptors name (Servers.Kind).
	Name backends.Kind
	// Offers returns what a cluster of count servers of the kind offers
	// the faults: the capabilities it has by its nature, those of the
	// mechanisms (Mechanisms) its nodes can be started with, and, for each
	// it lacks by its nature, why — the one place that reason is written.
	Offers func(count int) Offer
}

// Offer is what a cluster of a kind offers the faults (see Kind.Offers).
type Offer struct {
	// Caps are the capabilities the cluster has, or can be started with:
	// of the mechanisms among them, the runner keeps those available on
	// this machine.
	Caps nemesis.Capability
	// Why says, for each capability the kind lacks, why.
	Why map[nemesis.Capability]string
}

// Mechanisms are the capabilities a node gets from a fault mechanism it is
// started with, rather than from its kind: network namespaces (client and
// peer links), the proxy, the lazy filesystem and the clock preload.
const Mechanisms = nemesis.ClientLinks | nemesis.PeerLinks | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock

var (
	mu       sync.RWMutex
	registry = map[backends.Kind]Kind{}
)

// Register makes kind k known under k.Name. It is meant to be called from
// the kind package's init function, and panics if the name is empty or
// taken or Offers is nil, which are programming errors.
func Register(k Kind) {
	mu.Lock()
	defer mu.Unlock()
	if k.Name == backends.NoServers || k.Offers == nil {
		panic("kinds: Register needs a name and Offers")
	}
	if _, dup := registry[k.Name]; dup {
		panic("kinds: Register called twice for " + string(k.Name))
	}
	registry[k.Name] = k
}

// Lookup returns kind name, or an error naming it when no package
// registered it.
func Lookup(name backends.Kind) (Kind, error) {
	mu.RLock()
	defer mu.RUnlock()
	k, ok := registry[name]
	if !ok {
		return Kind{}, fmt.Errorf("kinds: lockbench does not start %q servers (it starts %v); give their addresses", name, names())
	}
	return k, nil
}

// Names returns the registered kinds, sorted.
func Names() []backends.Kind {
	mu.RLock()
	defer mu.RUnlock()
	return names()
}

func names() []backends.Kind {
	out := make([]backends.Kind, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// serverless is why a backend on no servers faces no server fault.
const serverless = "the backend runs on no servers: there are none to fault"

// Shape is the shape of servers s before any starts, for telling which
// faults apply: what their kind offers, less the mechanisms this machine
// cannot start them with (each with the mechanism's own reason). A kind
// nobody registered has no capability, and says so.
func Shape(s backends.Servers) nemesis.Shape {
	if s.Kind == backends.NoServers {
		return lacksAll(serverless)
	}
	k, err := Lookup(s.Kind)
	if err != nil {
		return lacksAll(err.Error())
	}
	o := k.Offers(s.Count)
	sh := nemesis.Shape{Nodes: s.Count, Caps: o.Caps, Why: map[nemesis.Capability]string{}}
	for c, why := range o.Why {
		sh.Why[c] = why
	}
	for c, avail := range Available() {
		if sh.Caps&c != 0 && avail != nil {
			sh.Caps &^= c
			sh.Why[c] = fmt.Sprintf("%s, which this machine cannot give: %v", c.Takes(), avail)
		}
	}
	return sh
}

// lacksAll is the shape of no servers: every capability lacking, for why.
func lacksAll(why string) nemesis.Shape {
	sh := nemesis.Shape{Why: map[nemesis.Capability]string{}}
	for _, c := range nemesis.Capabilities() {
		sh.Why[c] = why
	}
	return sh
}

// Available says, for each mechanism capability, whether this machine can
// start nodes with it: nil, or why not (the mechanism's own words). It asks
// once per process.
var Available = sync.OnceValue(func() map[nemesis.Capability]error {
	netns := compose.PeerNetworkAvailable()
	return map[nemesis.Capability]error{
		nemesis.ClientLinks:  netns,
		nemesis.PeerLinks:    netns,
		nemesis.Proxy:        nil,
		nemesis.LosableData:  compose.LazyFSAvailable(),
		nemesis.MovableClock: compose.FakeClockAvailable(),
	}
})

// Quorum is what n members that elect their leader among themselves
// (ZooKeeper, etcd) offer the faults: a leader to kill or cut off, links
// between them to cut, a minority to crash when n is at least 3, and the
// node faults of the proxy, namespaces and lazy filesystem. failover says
// why the kind has no failover; the kind adds the clock preload if it
// takes it.
func Quorum(n int, failover string) Offer {
	o := Offer{
		Caps: nemesis.Servers | nemesis.Leadership | nemesis.Election | nemesis.PeerLinks |
			nemesis.ClientLinks | nemesis.Proxy | nemesis.LosableData,
		Why: map[nemesis.Capability]string{nemesis.Failover: failover},
	}
	if n >= 3 {
		o.Caps |= nemesis.Minority
	}
	return o
}
