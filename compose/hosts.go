package compose

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/remote"
)

// A Placement puts a server on a host of the caller's choosing, reached
// through a remote.Remote (an SSH host, or this machine): the inventory of
// a run over several hosts says where each server goes. Every control of
// the node then runs on that host through its Remote, as it runs here
// through remote.Local: the same code starts, pauses, kills, cuts and
// jumps the clock of a server here and there.
type Placement struct {
	// Host is the host the server runs on.
	Host remote.Remote
	// Addr is the host's address: the server listens on it, and its
	// clients, its peers and the control node reach it there.
	Addr netip.Addr
	// Port is the server's port on Addr, where its clients reach it.
	Port int
	// PeerPorts are the ports on Addr where the members of a quorum
	// reach each other, in the order of the kind's (LayOutOn): etcd's
	// peer port; ZooKeeper's quorum and election ports (a run over an
	// inventory passes a Sentinel node's sentinel port here too). A port
	// left out, or 0, is the kind's standard one (etcd 2380; ZooKeeper
	// 2888 and 3888); ports beyond the kind's are ignored. A partition
	// between members (Peers.Partition) cuts these ports only, so that
	// clients and the control node keep reaching every member.
	PeerPorts []int
	// Dir is the server's data dir on the host; its pidfile, log and
	// clock files go beside it (Dir.pid, Dir.log, Dir.clock). Start
	// makes it; Restart(false) empties it.
	Dir string
	// Binary is the server's program on the host; "" is the kind's usual
	// name, found on the host's PATH.
	Binary string
	// ClockPreload is a prebuilt clock preload on the host; "" builds it
	// there with Programs.CC from compose's source.
	ClockPreload string
	// Lockbench is the lockbench binary on the host (a static one): it
	// serves the lazy filesystem of a server started with LazyFS there,
	// as a daemon of its own (see LazyFSMain), and runs its Proxy
	// (ProxyMain). "" refuses LazyFS and Proxy.
	Lockbench string
	// Clients are the hosts the server's clients run on: CutClients cuts
	// the server off from each of them, and each of them from it.
	Clients []Peer
	// Proxy, when set, runs a proxy beside the server on its host
	// (PlacedProxy): the node's Addr and Proxy are then the proxy's, and
	// a cut of its clients cuts the proxy's port too.
	Proxy *PlacedProxy
}

// A Peer is a host as a cut sees it: the Remote that changes its rules,
// and its address.
type Peer struct {
	Host remote.Remote
	Addr netip.Addr
}

// Check says what is wrong with p, for a server of kind what (in its
// error): what every kind checks of a placement before it starts a
// server there (LayOutOn checks each).
func (p *Placement) Check(what string) error {
	var errs []error
	switch {
	case p.Host == nil:
		errs = append(errs, errors.New("no host"))
	case !p.Addr.IsValid():
		errs = append(errs, fmt.Errorf("on %s: no address", p.Host.Name()))
	}
	if p.Port < 1 || p.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d: want 1 to 65535", p.Port))
	}
	for _, q := range p.PeerPorts {
		if q < 0 || q > 65535 || q == p.Port {
			errs = append(errs, fmt.Errorf("peer port %d: want 1 to 65535 (or 0, the standard one), other than the client port %d", q, p.Port))
		}
	}
	if !path.IsAbs(p.Dir) || path.Clean(p.Dir) == "/" {
		errs = append(errs, fmt.Errorf("dir %q: want an absolute path below /", p.Dir))
	}
	if p.Proxy != nil {
		if err := p.Proxy.check(p.Port, p.PeerPorts, p.Lockbench); err != nil {
			errs = append(errs, err)
		}
	}
	for i, c := range p.Clients {
		if c.Host == nil || !c.Addr.IsValid() {
			errs = append(errs, fmt.Errorf("client host %d: want its Remote and its address", i))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("compose: %s placement: %w", what, err)
	}
	return nil
}

// peerPorts are the peer ports of a kind whose standard ones are def:
// p's PeerPorts where they name one, def's elsewhere.
func (p *Placement) peerPorts(def ...int) []int {
	out := slices.Clone(def)
	for i := range min(len(out), len(p.PeerPorts)) {
		out[i] = cmp.Or(p.PeerPorts[i], out[i])
	}
	return out
}

// cutPaths are the paths a cut of a placed node's clients drops: on its
// host, its answers to each client host (from its port); on each client
// host, what it sends to the node's port. Rules on what a host sends are
// the silent kind: one on what it receives makes a host without
// forwarding answer with an ICMP unreachable. A connection already open
// goes silent both ways (each side's TCP retransmits into the void); a
// new connection from a client host fails there at once (its own rule
// refuses to route it, EINVAL), where a cut cable would let it time out.
// A node with a proxy beside it (Placement.Proxy) is cut at the proxy's
// port too: the clients reach it there.
func (n *Node) cutPaths() (server []remote.Path, clients []Peer, toServer []remote.Path) {
	p := n.spec.place
	for _, port := range n.clientPorts() {
		for _, c := range p.Clients {
			server = append(server, remote.Path{Addr: c.Addr, SPort: uint16(port)})
		}
		toServer = append(toServer, remote.Path{Addr: p.Addr, DPort: uint16(port)})
	}
	return server, p.Clients, toServer
}

// clientPorts are the ports of a placed node's host where its clients
// reach it: the server's, and its proxy's when it has one.
func (n *Node) clientPorts() []int {
	ports := []int{n.spec.place.Port}
	if n.proxy != nil {
		ports = append(ports, n.proxy.Port())
	}
	return ports
}

// cutPlaced cuts a placed node off from its client hosts, both ways, or
// heals that cut.
func (n *Node) cutPlaced(cut bool) error {
	p := n.spec.place
	if len(p.Clients) == 0 {
		return fmt.Errorf("compose: %s on %s: no client hosts to cut it off from (Placement.Clients)", n.Name, p.Host.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	server, clients, toServer := n.cutPaths()
	op := remote.CutPaths
	if !cut {
		op = remote.HealPaths
	}
	errs := []error{op(ctx, p.Host, server...)}
	for _, c := range clients {
		errs = append(errs, op(ctx, c.Host, toServer...))
	}
	n.mu.Lock()
	n.cut = cut
	n.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("compose: cut clients of %s: %w", n.Name, err)
	}
	return nil
}

// unreachablePlaced proves a placed node's clients are cut off: from each
// client host a connection to it — to the server's port, and to its
// proxy's when it has one — fails within d without a word from the
// server (bash's /dev/tcp under timeout: it times out, or the host's own
// blackhole rule refuses to route it, EINVAL), while this machine, the
// control node, still connects. A refusal (a reset: the server's kernel
// answered) or a connection is no cut.
func (n *Node) unreachablePlaced(ctx context.Context, d time.Duration) error {
	p := n.spec.place
	if len(p.Clients) == 0 {
		return fmt.Errorf("compose: %s on %s: no client hosts to try it from", n.Name, p.Host.Name())
	}
	secs := strconv.FormatFloat(max(d.Seconds(), 0.1), 'f', 1, 64)
	// Each try is a command over SSH: round trips on top of d, which a
	// busy machine makes seconds. They are bounded by a timeout of their
	// own, not by the caller's deadline (a fault's window), which would
	// fail a cut in force for the time its proof took.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d+30*time.Second)
	defer cancel()
	ports := n.clientPorts()
	errs := make([]error, len(p.Clients)*len(ports))
	var wg sync.WaitGroup
	for i, c := range p.Clients {
		for j, port := range ports {
			wg.Go(func() { errs[i*len(ports)+j] = tryFrom(ctx, c, n.Name, p.Addr, port, secs) })
		}
	}
	wg.Wait()
	var dialer net.Dialer
	dctx, cancel := context.WithTimeout(ctx, max(d, 5*time.Second))
	defer cancel()
	if c, err := dialer.DialContext(dctx, "tcp", n.ServerAddr()); err != nil {
		errs = append(errs, fmt.Errorf("compose: %s: the control node lost it too (%w): the cut took more than its clients' paths", n.Name, err))
	} else {
		c.Close()
	}
	return errors.Join(errs...)
}

// tryFrom connects from host c to addr:port (bash's /dev/tcp under a
// timeout of secs seconds) and answers nil when that is cut: the
// connection timed out (the answers are dropped), or c's own blackhole
// rule refused to route it (EINVAL). A connection, or a refusal (a reset:
// the far kernel answered), is no cut; what names the far end.
func tryFrom(ctx context.Context, c Peer, what string, addr netip.Addr, port int, secs string) error {
	err := c.Host.Run(ctx, remote.Cmd{Path: "timeout", Args: []string{secs, "bash", "-c", `exec 3<>"/dev/tcp/$1/$2"`, "bash", addr.String(),
		strconv.Itoa(port)}})
	switch e, ok := remote.IsExit(err); {
	case err == nil:
		return fmt.Errorf("compose: %s (%s) is reachable from %s", what, net.JoinHostPort(addr.String(), strconv.Itoa(port)), c.Host.Name())
	case ok && e.Code == 124: // timed out: the answers are dropped
	case ok && strings.Contains(e.Stderr, "Invalid argument"): // the host's own rule
	case ok:
		return fmt.Errorf("compose: %s from %s: the connection failed at once (%v): a cut drops packets silently", what, c.Host.Name(), err)
	default:
		return fmt.Errorf("compose: %s from %s: %w", what, c.Host.Name(), err)
	}
	return nil
}

// startAfresh starts d on host as remote.Start does, except that a
// process an earlier run left running under d's pidfile (that run lost
// its link to the host) is killed by the pidfile first and d started in
// its place: what every daemon compose places on a host (a server, its
// proxy, its lazy filesystem) needs on its first start there.
func startAfresh(ctx context.Context, host remote.Remote, d remote.Daemon) (remote.Proc, error) {
	proc, err := remote.Start(ctx, host, d)
	if errors.Is(err, remote.ErrRunning) {
		if err = proc.Kill(ctx); err == nil {
			proc, err = remote.Start(ctx, host, d)
		}
	}
	return proc, err
}
