package nemesis

import (
	"fmt"
	"math/bits"
	"strings"
)

// Capability is something a cluster offers the faults that break it, as
// Jepsen's nemeses ask a test whether it satisfies what they need: a
// scenario requires capabilities (Scenario.Requires), and applies to a
// cluster exactly when the cluster has them all. A cluster that lacks one
// says why, in the words of the server kind or the fault mechanism that
// does not implement it (Shape.Why); that reason is what a skipped case
// records and the report prints.
type Capability uint16

// The capabilities, in the order Fits asks for them: the first a cluster
// lacks is the reason a scenario does not apply.
const (
	// Servers: there are servers to fault at all.
	Servers Capability = 1 << iota
	// Minority: a cluster of at least 3 nodes, a minority of which can
	// die while the majority serves.
	Minority
	// Leadership: a leader or master to find among the nodes.
	Leadership
	// Election: the nodes elect their leader among themselves (ZooKeeper,
	// etcd): a leader can be killed or cut off, and another elected.
	Election
	// PeerLinks: the traffic between the members can be cut and healed
	// (each member in a network namespace, or on a host, of its own).
	PeerLinks
	// Failover: a master whose replication to its replicas can be held
	// back, and something that promotes a replica when it dies.
	Failover
	// ClientLinks: every node sits in a network namespace of its own, so
	// that its clients can be cut off from it.
	ClientLinks
	// Proxy: the clients reach every node through a proxy that can delay
	// or cut their traffic.
	Proxy
	// LosableData: every node's data sits on a lazy filesystem, which a
	// power loss can drop what was not synced from.
	LosableData
	// MovableClock: every node runs under the clock preload, whose wall
	// clock can jump or run fast.
	MovableClock
	// ClientNets: every node is a member of one peer network of this
	// machine, which each client process can join in a network namespace
	// of its own (a ClientNet), so that a fault cuts one client off
	// from chosen nodes while the other clients keep them (split views).
	ClientNets
	// ClientQuorum: the lock's client asks a set of independent nodes
	// itself and counts their answers (Redlock, redsync): two clients that
	// see different majorities can both count one.
	ClientQuorum
	// ClientClock: the lock's client measures a lease's validity on a
	// clock the worker gives it (backends.Config.Clock), which a fault can
	// make miss a stall of the client (our Redlock).
	ClientClock

	lastCapability = ClientClock
)

// capNames are the capabilities' names, as errors and tests print them.
var capNames = map[Capability]string{
	Servers: "servers", Minority: "minority", Leadership: "leadership", Election: "election", PeerLinks: "peer links",
	Failover: "failover", ClientLinks: "client links", Proxy: "proxy", LosableData: "losable data", MovableClock: "movable clock",
	ClientNets: "client nets", ClientQuorum: "client quorum", ClientClock: "client clock",
}

// lacking is what a cluster lacking a capability is told when neither its
// kind nor the mechanism says more: what the capability takes.
var lacking = map[Capability]string{
	Servers:      "applies to backends with servers",
	Minority:     "needs a cluster of at least 3 nodes",
	Leadership:   "needs a leader or master to find among the nodes",
	Election:     "applies to clusters whose members elect their leader among themselves (ZooKeeper, etcd)",
	PeerLinks:    "needs the members in network namespaces of their own (root and the ip command), or each on a host of its own",
	Failover:     "applies to a Sentinel set, with replication links it can hold back (proxied here, rules on hosts)",
	ClientLinks:  "needs servers in network namespaces of their own (root and the ip command), so that their clients' traffic can be cut",
	Proxy:        "needs servers the clients reach through proxies",
	LosableData:  "needs servers whose data sits on a lazy filesystem (root and /dev/fuse)",
	MovableClock: "needs servers run under the clock preload",
	ClientNets: "needs every node a member of one peer network of this machine (root and the ip command), " +
		"which each client process joins in a namespace of its own",
	ClientQuorum: "applies to locks whose client asks a quorum of independent nodes itself (Redlock, redsync)",
	ClientClock:  "applies to locks whose client takes the clock it measures a lease's validity on (our Redlock)",
}

// Takes says what a cluster needs to have capability c (one capability):
// what a cluster that lacks it is told when nobody says more.
func (c Capability) Takes() string { return lacking[c] }

// String names the capabilities of c, joined by "+".
func (c Capability) String() string {
	var out []string
	for _, one := range c.each() {
		if n, ok := capNames[one]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("capability(%#x)", uint16(one)))
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, "+")
}

// each returns the single capabilities of c, in order.
func (c Capability) each() []Capability {
	var out []Capability
	for c != 0 {
		one := Capability(1) << bits.TrailingZeros16(uint16(c))
		out = append(out, one)
		c &^= one
	}
	return out
}

// Capabilities lists every capability, in order.
func Capabilities() []Capability {
	return (lastCapability<<1 - 1).each()
}

// Inapplicable is the error of a scenario that does not apply to a
// cluster: the first capability it requires that the cluster lacks, and
// the cluster's reason.
type Inapplicable struct {
	// Fault is the scenario's name.
	Fault string
	// Missing is the capability the cluster lacks.
	Missing Capability
	// Reason says why the cluster lacks it, in a sentence a reader of the
	// report understands.
	Reason string
}

// Error says which fault does not apply, and why.
func (e *Inapplicable) Error() string { return fmt.Sprintf("fault %s: %s", e.Fault, e.Reason) }

// requires returns nil if sh has every capability in req, or the first it
// lacks, with sh's reason.
func (sh Shape) requires(fault string, req Capability) error {
	for _, c := range req.each() {
		if sh.Caps&c != 0 {
			continue
		}
		return &Inapplicable{Fault: fault, Missing: c, Reason: sh.why(c)}
	}
	return nil
}

// why is sh's reason for lacking c: its own, or what c takes.
func (sh Shape) why(c Capability) string {
	if r := sh.Why[c]; r != "" {
		return r
	}
	return lacking[c]
}

// Has reports whether sh has every capability in c.
func (sh Shape) Has(c Capability) bool { return sh.Caps&c == c }

// Reason returns why sh lacks capability c (the first of c's it lacks),
// or "" when it has them all.
func (sh Shape) Reason(c Capability) string {
	for _, one := range c.each() {
		if sh.Caps&one == 0 {
			return sh.why(one)
		}
	}
	return ""
}

// Equal reports whether sh and o have the same nodes, capabilities and
// reasons.
func (sh Shape) Equal(o Shape) bool {
	if sh.Nodes != o.Nodes || sh.Caps != o.Caps {
		return false
	}
	for _, c := range Capabilities() {
		if sh.Reason(c) != o.Reason(c) {
			return false
		}
	}
	return true
}
