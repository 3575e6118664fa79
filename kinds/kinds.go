// Package kinds is the registry of the server kinds lockbench starts for
// its backends (Redis, Sentinel sets, ZooKeeper, etcd, PostgreSQL): each
// kind's package registers, in an init function, one Kind keyed by
// backends.Kind — what a cluster of it offers the faults, and why it
// lacks the rest — as go-ycsb's drivers register themselves. The runner
// reads it and branches on no kind's name. Import
// github.com/lockbench/lockbench/kinds/all to register every kind.
package kinds

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
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
	// Start starts a cluster of the kind as spec says, on this machine or
	// on the hosts spec.On places its nodes on: one path for both.
	Start func(ctx context.Context, env *compose.Env, spec Spec) (*Cluster, error)
	// OnHost is what a server of the kind needs on its host when a run
	// over an inventory starts it there (lockbench hosts checks it): the
	// program it runs when the inventory names none, the files it reads,
	// or the program the run uploads (Uploaded). Nil needs nothing the
	// inventory does not name.
	OnHost func() inventory.Needs
	// Program, when OnHost's Uploaded is set, returns the path on this
	// machine of the program the run uploads to each host for the kind's
	// servers (etcd-member); the placement's Binary is then its path there.
	Program func() (string, error)
	// Unsupported maps a durability profile the kind's servers cannot run
	// under to why (a consensus log has no periodic sync).
	Unsupported map[compose.Durability]string
	// PeerNetwork says that the kind's members sit in network namespaces
	// of their own whenever this machine allows it (so that their links
	// can be cut): a fault that needs its clients cut off asks nothing
	// more of them.
	PeerNetwork bool
	// Versions, when set, returns the versions of the kind's server
	// software on this machine, by program ("redis-server"), for a run's
	// record: what a reader needs to reproduce it. A version that cannot be
	// read is left out.
	Versions func(ctx context.Context) map[string]string
	// StartCost is how long starting a cluster of count servers of the
	// kind takes on a 2-core machine: what a plan (advise) estimates a
	// fresh start at. Nil is a start too quick to count.
	StartCost func(count int) time.Duration
}

// Every is a StartCost of d for each server.
func Every(d time.Duration) func(int) time.Duration {
	return func(count int) time.Duration { return time.Duration(max(count, 1)) * d }
}

// Once is a StartCost of d for the whole cluster: its servers start
// side by side.
func Once(d time.Duration) func(int) time.Duration {
	return func(int) time.Duration { return d }
}

// Spec is how to start one cluster of a kind: its size, durability, the
// mechanisms its nodes start with and where they run.
type Spec struct {
	// Count is how many servers hold data (Servers.Count).
	Count int
	// Durability is the profile their data is kept under.
	Durability compose.Durability
	// Needs are the fault mechanisms the nodes are started with: a lazy
	// filesystem, the clock preload, network namespaces of their own.
	Needs nemesis.Needs
	// On, when set, places the nodes on hosts, one placement each (the
	// inventory's); nil starts them on this machine, behind proxies.
	On []compose.Placement
}

// Cluster is a started cluster of a kind.
type Cluster struct {
	// Target is what the faults break (the runner adds the backend's
	// Priority, Probe and Why).
	Target nemesis.Target
	// Nodes are Target's nodes, as compose started them.
	Nodes []*compose.Node
	// Processes are every server process of the cluster: its nodes, and
	// any that run beside them (a Sentinel set's sentinels).
	Processes []*compose.Node
	// Dial, when set, are the addresses the clients dial instead of the
	// nodes' (a Sentinel set's sentinels), and Master the name they know
	// the master by.
	Dial   []string
	Master string
}

// Nodes is a cluster of independent nodes (or members whose leader the
// kind's target does not find): its target, and its processes.
func Nodes(nodes []*compose.Node) *Cluster {
	return &Cluster{Target: nemesis.Target{Nodes: AsNodes(nodes)}, Nodes: nodes, Processes: nodes}
}

// Addrs are the addresses the clients of cl dial: Dial when set, else
// each node's proxy when proxied (a fault works through the proxies), or
// the servers themselves (a proxy costs a hop the other faults do not
// need).
func (cl *Cluster) Addrs(proxied bool) []string {
	if cl.Dial != nil {
		return cl.Dial
	}
	var out []string
	for _, n := range cl.Nodes {
		if proxied {
			out = append(out, n.Addr())
		} else {
			out = append(out, n.ServerAddr())
		}
	}
	return out
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
const Mechanisms = nemesis.ClientLinks | nemesis.ClientNets | nemesis.PeerLinks | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock

var (
	mu       sync.RWMutex
	registry = map[backends.Kind]Kind{}
)

// Register makes kind k known under k.Name. It is meant to be called from
// the kind package's init function, and panics if the name is empty or
// taken or Offers or Start is nil, which are programming errors.
func Register(k Kind) {
	mu.Lock()
	defer mu.Unlock()
	if k.Name == backends.NoServers || k.Offers == nil || k.Start == nil {
		panic("kinds: Register needs a name, Offers and Start")
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
		nemesis.ClientNets:   netns,
		nemesis.Proxy:        nil,
		nemesis.LosableData:  compose.LazyFSAvailable(),
		nemesis.MovableClock: compose.FakeClockAvailable(),
	}
})

// Elected is the cluster of members that elect their leader among
// themselves (an etcd cluster, a ZooKeeper ensemble) started per spec: q
// finds the leader, and cuts the members apart when they talk over the
// peer network here, or when each has a host of its own (which rules on
// their hosts need).
func Elected(nodes []*compose.Node, q interface {
	composeLeader
	composeMembers
}, spec Spec) *Cluster {
	cl := Nodes(nodes)
	cl.Target.Leader, cl.Target.Elects = Leads(q), true
	if PeersCut(spec) {
		cl.Target.Members = members{q}
	}
	return cl
}

// Versions returns the versions of the server software of every
// registered kind (Kind.Versions), merged, each probe bounded by 5 s.
func Versions(ctx context.Context) map[string]string {
	mu.RLock()
	ks := make([]Kind, 0, len(registry))
	for _, k := range registry {
		ks = append(ks, k)
	}
	mu.RUnlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v := map[string]string{}
	for _, k := range ks {
		if k.Versions != nil {
			maps.Copy(v, k.Versions(ctx))
		}
	}
	return v
}

// Probe runs a program (args) on this machine and returns the first
// submatch of re in what it prints, or false: how a kind reads its
// software's version ("redis-server --version", dpkg-query).
func Probe(ctx context.Context, re string, args ...string) (string, bool) {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return "", false
	}
	m := regexp.MustCompile(re).FindStringSubmatch(string(out))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Here reports whether spec starts its nodes on this machine.
func (s Spec) Here() bool { return s.On == nil }

// Compose is the compose.Spec that starts the nodes s asks for as a kind
// starts them unless it says otherwise: s's count, durability and
// mechanisms; here each behind its proxy (a fault works through it) and
// in a network namespace of its own when s needs one; or on the hosts
// s.On names.
func (s Spec) Compose() compose.Spec {
	return compose.Spec{
		Nodes: s.Count, Durability: s.Durability, LazyFS: s.Needs.LazyFS, FakeClock: s.Needs.FakeClock,
		Proxied: s.Here(), Netns: s.Needs.Netns && s.Here(), On: s.On,
	}
}

// PeersCut reports whether members started per spec can be cut apart:
// here, when this machine gives them network namespaces; on hosts, when
// each has a host of its own.
func PeersCut(spec Spec) bool {
	if spec.On == nil {
		return Available()[nemesis.PeerLinks] == nil
	}
	addrs := map[netip.Addr]bool{}
	for _, p := range spec.On {
		addrs[p.Addr] = true
	}
	return len(addrs) == len(spec.On)
}

// NoPeriodic is the Unsupported of a kind that syncs its log at every
// commit or never: it has no periodic profile.
func NoPeriodic(kind backends.Kind) map[compose.Durability]string {
	return map[compose.Durability]string{
		compose.DurabilityPeriodic: fmt.Sprintf("%s has no periodic profile: it syncs its log at every commit (durable) or never (fast)", kind),
	}
}

// Quorum is what n members that elect their leader among themselves
// (ZooKeeper, etcd) offer the faults: a leader to kill or cut off, links
// between them to cut, a minority to crash when n is at least 3, and the
// node faults of the proxy, namespaces and lazy filesystem. failover says
// why the kind has no failover; the kind adds the clock preload if it
// takes it.
func Quorum(n int, failover string) Offer {
	o := Offer{
		Caps: nemesis.Servers | nemesis.Leadership | nemesis.Election | nemesis.PeerLinks |
			nemesis.ClientLinks | nemesis.ClientNets | nemesis.Proxy | nemesis.LosableData,
		Why: map[nemesis.Capability]string{nemesis.Failover: failover,
			nemesis.ClientQuorum: "its clients ask the elected leader, not a quorum of independent nodes"},
	}
	if n >= 3 {
		o.Caps |= nemesis.Minority
	}
	return o
}
