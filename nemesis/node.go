package nemesis

import (
	"context"
	"net/netip"
	"time"

	"github.com/lockbench/lockbench/internal/server"
	"github.com/lockbench/lockbench/remote"
)

// What a fault acts on, as interfaces the nemesis declares itself: a
// scenario breaks a server through what the server can do, not through
// the package that started it, so that any server kind, a fake in a test,
// or servers started elsewhere can be a target. compose's *Node satisfies
// Node and every capability below; its clusters are wrapped where targets
// are built (package kinds).
//
// A capability a node may lack is an interface of its own, which a
// scenario asks for with a type assertion (as io.Copy asks a Writer for
// WriterTo), and whose Has method says whether this node, as it was
// started, offers it: Target.Shape reads them.

// A Node is one server a fault can strike: it names itself and has a
// process a fault can stop, kill, start again and pause. Nodes are
// compared with ==: an implementation is a pointer, or another comparable
// type that stands for one server.
type Node interface {
	// String returns the node's name, as injections record it
	// ("redis-2").
	String() string
	// ServerAddr returns the address the server itself listens on
	// (host:port), where a probe reads what it holds.
	ServerAddr() string
	// PID returns the server's process id on its host, or 0 when it is
	// not running.
	PID() int
	// Running reports whether the server was started and no control has
	// ended it since.
	Running() bool
	// Start starts the server if it is not running and waits until it is
	// ready or ctx ends. Its error wraps server.ErrExited when the
	// server exited instead, server.ErrNotReady when it still runs.
	Start(ctx context.Context) error
	// Stop shuts the server down in order (SIGTERM) and waits until it
	// has exited.
	Stop() error
	// Kill kills the server's processes (SIGKILL) and waits until they
	// have gone.
	Kill() error
	// Pause stops every process of the server (SIGSTOP) and returns once
	// every thread has stopped.
	Pause() error
	// Resume continues a paused server (SIGCONT).
	Resume() error
}

// ClientCutter is a node whose clients a fault can cut off from it (the
// capability ClientLinks): its traffic with them dropped both ways, as
// in a real partition.
type ClientCutter interface {
	// Cuttable reports whether the node's clients can be cut off (it sits
	// in a network namespace, or on a host, of its own).
	Cuttable() bool
	// CutClients cuts the node's clients off; HealClients lifts the cut.
	CutClients() error
	HealClients() error
	// Unreachable returns nil when a connection from the clients' side
	// to the node times out within d, as a cut makes it, and an error
	// saying what happened otherwise: the proof of a cut.
	Unreachable(ctx context.Context, d time.Duration) error
}

// Proxied is a node its clients reach through a proxy that can delay
// their traffic (the capability Proxy).
type Proxied interface {
	// HasProxy reports whether the node was started behind a proxy.
	HasProxy() bool
	// Delay slows every response from the node by d; Heal undoes it.
	Delay(d time.Duration) error
	Heal() error
	// ProxyFaults lists the faults in force on the proxy, as it enforces
	// them ("delay: latency 50ms on downstream"): the proof of a fault
	// made there.
	ProxyFaults(ctx context.Context) ([]string, error)
}

// Clock is a node whose server's wall clock a fault can move (the
// capability MovableClock): it runs under a clock preload.
type Clock interface {
	// HasFakeClock reports whether the server runs under the preload.
	HasFakeClock() bool
	// JumpClock moves the server's wall clock forward by d.
	JumpClock(d time.Duration) error
	// SetClockRate makes the server's wall clock run rate times real
	// time (1: real speed again).
	SetClockRate(rate float64) error
	// ServerTime reads the time as the server itself tells it.
	ServerTime(ctx context.Context) (time.Time, error)
}

// Disk is a node whose data a power loss can lose (the capability
// LosableData): its data dir sits on a lazy filesystem, which keeps what
// the server did not sync in memory.
type Disk interface {
	// HasLazyFS reports whether the node's data sits on a lazy
	// filesystem.
	HasLazyFS() bool
	// PowerLoss kills the server and drops every write it had not
	// synced, and returns what it dropped. The node stays down.
	PowerLoss() (server.Unsynced, error)
}

// PeerMember is a node that is a member of a peer network of this
// machine, which each client process can join in a network namespace of
// its own (the capability ClientNets).
type PeerMember interface {
	// PeerNetwork returns the network's prefix, or the zero Prefix when
	// the node is in none: nodes with equal valid prefixes share one.
	PeerNetwork() netip.Prefix
}

// Placed is a node that runs on a host, which the injections that hit it
// name when it is not this machine.
type Placed interface {
	Host() remote.Remote
}

// Leader finds the current leader (or master) of a cluster: a ZooKeeper
// ensemble, an etcd cluster or a Sentinel set, wrapped by package kinds.
type Leader interface {
	// Leader returns the leader among the target's nodes.
	Leader(ctx context.Context) (Node, error)
}

// Members cuts a cluster's members apart from each other and heals them:
// a ZooKeeper ensemble or an etcd cluster started with Netns, wrapped by
// package kinds.
type Members interface {
	// Partition cuts the traffic between the groups, each a set of the
	// target's nodes; the nodes in no group form one more.
	Partition(groups ...[]Node) error
	// HealPartition lets every member reach every other again.
	HealPartition() error
	// AwaitServing waits until every member serves again.
	AwaitServing(ctx context.Context) error
	// Isolated returns nil when member n says it lost its peers (no
	// quorum, no leader), and why not otherwise: the proof of a cut.
	Isolated(ctx context.Context, n Node) error
}

// FailoverSet is a master with replicas, and what promotes a replica
// when the master fails (Redis Sentinel): the failover fault holds
// replication back, kills the master, and waits for the promotion.
// Addresses are the servers' own (Node.ServerAddr).
type FailoverSet interface {
	// CurrentMaster returns the address of the node the set reports as
	// its master now.
	CurrentMaster(ctx context.Context) (string, error)
	// AwaitNewMaster waits until the set reports a master other than old,
	// and returns its address.
	AwaitNewMaster(ctx context.Context, old string) (string, error)
	// SetDownAfter sets how long the master must fail to answer before
	// whatever promotes a replica begins a failover.
	SetDownAfter(ctx context.Context, d time.Duration) error
	// Node returns the set's node at addr, or nil when none is there.
	Node(addr string) Node
	// ReplicationLinks are the paths the replicas' replication streams
	// take from the master, which a fault holds back; none when they
	// cannot be.
	ReplicationLinks() []Link
	// Side says, in words, where whatever promotes a replica sits
	// relative to a cut of a node's clients: on the clients' side (it
	// loses the node with them), or on the servers'.
	Side() string
}

// A Link is a path between servers that a fault can hold back and let
// flow again.
type Link interface {
	// Partition drops every packet of the link until Heal, and proves
	// it cut.
	Partition() error
	Heal() error
}

// ClientNet is one client process's network namespace on the nodes' peer
// network, which a split view cuts from chosen nodes while every other
// client keeps them.
type ClientNet interface {
	// Addr is the client's address, from which its connections come.
	Addr() netip.Addr
	// Cut replaces the client's cut by one from exactly nodes; Heal
	// lifts it.
	Cut(nodes ...Node) error
	Heal() error
	// Reaches dials n from inside the namespace: nil when it connects
	// within d, an error that says whether the dial timed out otherwise.
	Reaches(ctx context.Context, n Node, d time.Duration) error
}
