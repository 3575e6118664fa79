package compose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/remote"
)

// NodeSpec says how to run one server: what a kind's package builds for
// each of its nodes and hands to Env.StartNode or Env.StartNodes. Layout.Place
// fills in where it runs (a network namespace, a host); the Spec it starts
// with adds the mechanisms (a proxy, a lazy filesystem, the clock preload).
type NodeSpec struct {
	// Name identifies the node, e.g. "redis-2": Env.NewNames makes
	// names unique in an Env.
	Name string
	// Port is the port clients use (the proxy's port when the node is
	// proxied); the server may use more ports internally.
	Port int
	// Host is the address the server listens on; "" means 127.0.0.1.
	Host string
	// Binary is the server's program, on its host.
	Binary string
	// Args are the server's arguments.
	Args []string
	// Env is the server's environment beyond its host's.
	Env []string
	// Prepare, when set, writes the node's configuration into its dir
	// before each start (the dir may just have been wiped).
	Prepare func(ctx context.Context, n *Node) error
	// Argv, when set, replaces Args at each start, after Prepare: for a
	// server whose command line depends on what Prepare found.
	Argv func() []string
	// Ready returns nil once the node serves requests.
	Ready func(ctx context.Context) error
	// Dir, when set, is the node's dir instead of <run dir>/<name>: a
	// server that runs as another user must be able to reach it, and a
	// run dir may lie under a dir only we can enter. Env.Close removes
	// it.
	Dir string
	// User, when set, is the account the server runs as (PostgreSQL
	// refuses to run as root).
	User string
	// Term is the signal that asks the server to shut down; 0 means
	// SIGTERM.
	Term syscall.Signal
	// Clock, when set, reads the server's wall clock at addr
	// (Node.ServerTime).
	Clock func(ctx context.Context, addr string) (time.Time, error)

	// net, when set, is the network whose member-th namespace the server
	// runs in (a node started with Netns); nil is this process's
	// namespace.
	net    *peerNet
	member int
	// place, when set, puts the server on another host: see Placement.
	place *Placement
	// lazyFS puts the node's dir on a lazy filesystem (PowerLoss).
	lazyFS bool
	// fakeClock runs the server under the clock preload (JumpClock).
	fakeClock bool
}

// Node is one server process, on this machine or on a host reached
// through a remote.Remote: every control — start, signals, pause, kill,
// a cut, a clock jump — goes through its host's Remote, so a fault is
// written once for both. The process is known by its pidfile only. Its
// controls are safe for concurrent use.
type Node struct {
	// Name identifies the node in logs and results, e.g. "redis-2".
	Name string
	// Dir is the node's data and config dir, on its host; Restart(false)
	// wipes it.
	Dir string
	// Port is the port the server listens on.
	Port int

	env   *Env
	spec  NodeSpec
	host  remote.Remote
	proc  remote.Proc // its pidfile on host
	log   string      // its log on host
	proxy *Proxy      // nil unless the node is proxied
	lazy  lazyDisk    // nil unless its dir is on a lazy filesystem
	clock *nodeClock  // nil unless it runs on a fake clock

	ctl sync.Mutex // held by each control that starts or ends the process

	mu      sync.Mutex
	running bool // started, and not ended by a control since
	started bool // started once in this Env
	pid     int  // the server's pid on its host while running
	paused  bool
	cut     bool // a placed node's clients are cut off
	// failed once the server did not start, or exited when nobody
	// stopped it.
	failed bool
}

// opTimeout bounds a control that takes no context (Kill, Pause, Stop):
// over a broken link it fails rather than hangs.
const opTimeout = 2 * time.Minute

// Failed reports whether the server ever failed: did not become ready,
// or exited when nobody stopped it. Its data is then worth keeping. A
// node believed running is looked at on its host.
func (n *Node) Failed() bool {
	n.mu.Lock()
	failed, running := n.failed, n.running
	n.mu.Unlock()
	if failed || !running {
		return failed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err := n.proc.State(ctx); err == nil && st == remote.Gone {
		n.mu.Lock()
		n.failed = n.failed || n.running
		failed = n.failed
		n.mu.Unlock()
	}
	return failed
}

// String returns the node's name: a node names itself where it is not
// known as a *Node (a nemesis's target).
func (n *Node) String() string { return n.Name }

// Addr is the address clients should dial: the proxy in front of the node
// if it has one, the server itself otherwise.
func (n *Node) Addr() string {
	if n.proxy != nil {
		return n.proxy.Addr()
	}
	return n.ServerAddr()
}

// ServerAddr is the server's own address, bypassing any proxy: on
// 127.0.0.1, the member's own address in a Netns cluster, or its
// host's for a node placed on one.
func (n *Node) ServerAddr() string { return HostAddr(n.spec.Host, n.Port) }

// HostAddr is host:port, host "" being 127.0.0.1: the address a node
// listening on host (NodeSpec.Host, a Layout's Hosts) is reached at.
func HostAddr(host string, port int) string {
	if host == "" {
		return addr(port)
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// Host is the host the server runs on.
func (n *Node) Host() remote.Remote { return n.host }

// Pidfile is the server's pidfile on its host: the only way its process
// is found.
func (n *Node) Pidfile() string { return n.proc.Pidfile }

// PID returns the server's process id on its host, or 0 when it is not
// running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running {
		return 0
	}
	return n.pid
}

// Running reports whether the server was started and not stopped since
// (paused counts): a server that exited on its own counts until a
// control notices (see Failed).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running
}

// LogTail returns the last max bytes of the node's log.
func (n *Node) LogTail(max int64) string { return logTail(n.host, n.log, max) }

// logTail returns the last max bytes of the file log on host r, or "".
func logTail(r remote.Remote, log string, max int64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := remote.Output(ctx, r, "tail", "-c", strconv.FormatInt(max, 10), "--", log)
	if err != nil {
		return ""
	}
	return string(out)
}

// Exists reports whether file p exists on the node's host: looked at
// here for a node on this machine, through its host for a placed one.
// A kind's Prepare asks it of the files a node keeps across restarts.
func (n *Node) Exists(ctx context.Context, p string) (bool, error) {
	if n.spec.place == nil {
		_, err := os.Stat(p)
		return err == nil, nil
	}
	err := n.host.Run(ctx, remote.Cmd{Path: "test", Args: []string{"-e", p}})
	if e, ok := remote.IsExit(err); ok && e.Code == 1 {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("compose: %s: is %s there: %w", n.Name, p, err)
	}
	return true, nil
}

// WriteFiles writes each file (a name and its text) into the node's dir,
// on its host: what a kind's Prepare writes its configuration with.
func (n *Node) WriteFiles(ctx context.Context, files map[string]string) error {
	for name, text := range files {
		p := path.Join(n.Dir, name)
		var err error
		if n.spec.place == nil {
			err = os.WriteFile(p, []byte(text), 0o644)
		} else {
			err = remote.Upload(ctx, n.host, strings.NewReader(text), p, 0o644)
		}
		if err != nil {
			return fmt.Errorf("compose: %s: %w", n.Name, err)
		}
	}
	return nil
}

// StartNode registers the node ns describes in e, with the mechanisms s
// asks for (Proxied, LazyFS, FakeClock; ns is placed by Layout.Place), and
// starts it: Node.Start's error when it does not become ready.
func (e *Env) StartNode(ctx context.Context, s Spec, ns NodeSpec) (*Node, error) {
	n, err := e.newNode(ctx, s.with(ns), s.Proxied)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// StartNodes starts the nodes of specs together, as StartNode starts one,
// and waits until every one is ready. Members of a quorum system
// (ZooKeeper, etcd) need it: none is ready before a majority runs.
func (e *Env) StartNodes(ctx context.Context, s Spec, specs []NodeSpec) ([]*Node, error) {
	nodes := make([]*Node, len(specs))
	for i, ns := range specs {
		n, err := e.newNode(ctx, s.with(ns), s.Proxied)
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	if err := StartAll(ctx, nodes...); err != nil {
		return nil, err
	}
	return nodes, nil
}

// with is ns with the mechanisms of s that a node starts with.
func (s Spec) with(ns NodeSpec) NodeSpec {
	ns.lazyFS, ns.fakeClock = s.LazyFS, s.FakeClock
	return ns
}

// newNode registers a node in e, with its dir and, when asked, a proxy in
// front of it, without starting it.
func (e *Env) newNode(ctx context.Context, s NodeSpec, proxied bool) (*Node, error) {
	n := &Node{Name: s.Name, Dir: filepath.Join(e.Dir, s.Name), Port: s.Port, env: e, spec: s}
	n.host, n.proc.Pidfile, n.log = remote.Local{}, filepath.Join(e.Dir, s.Name+".pid"), filepath.Join(e.Dir, s.Name+".log")
	if s.Dir != "" {
		n.Dir = s.Dir
	}
	if s.net != nil {
		n.host = s.net.members[s.member].host(s.Name)
	}
	if p := s.place; p != nil {
		n.host, n.Dir = p.Host, p.Dir
		n.proc.Pidfile, n.log = p.Dir+".pid", p.Dir+".log"
		if proxied {
			return nil, fmt.Errorf("compose: %s on %s: a node placed on a host has no proxy here, where its clients cannot reach it (its "+
				"Placement's Proxy runs one on its host)", s.Name, p.Host.Name())
		}
		if s.lazyFS && p.Lockbench == "" {
			return nil, fmt.Errorf("compose: %s on %s: LazyFS needs the lockbench binary on the host (Placement.Lockbench), which serves it "+
				"there", s.Name, p.Host.Name())
		}
	}
	n.proc.Remote = n.host
	if s.lazyFS && s.place != nil {
		// Before anything looks at the dir: a mount that an earlier
		// run's daemon left there (its link broke) fails every look
		// until the new daemon, which kills the old one by its pidfile,
		// unmounts it.
		lazy, err := startLazyDaemon(ctx, n.host, s.place.Lockbench, n.Dir)
		if err != nil {
			return nil, fmt.Errorf("compose: %s: %w", s.Name, err)
		}
		n.lazy = lazy
	}
	if err := n.mkdir(ctx); err != nil {
		return nil, n.unlazy(err)
	}
	if err := e.add(n); err != nil {
		return nil, n.unlazy(err)
	}
	switch {
	case n.lazy != nil:
	case s.lazyFS:
		lazy, err := newLazyFS(diskOf(n.Dir), n.Dir)
		if err != nil {
			return nil, fmt.Errorf("compose: %s: %w", s.Name, err)
		}
		n.lazy = lazy
	}
	if s.fakeClock {
		c, err := e.newNodeClock(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("compose: %s: %w", s.Name, err)
		}
		n.clock = c
	}
	if proxied {
		p, err := e.Proxy(s.Name+"-proxy", n.ServerAddr())
		if err != nil {
			return nil, err
		}
		n.proxy = p
	}
	if s.place != nil && s.place.Proxy != nil {
		p, err := e.placedProxy(ctx, n)
		if err != nil {
			return nil, err
		}
		n.proxy = p
	}
	return n, nil
}

// unlazy unmounts the lazy filesystem of a node that did not make it into
// its Env (whose Close would have), adding to err what that fails of.
func (n *Node) unlazy(err error) error {
	if n.lazy != nil {
		err = errors.Join(err, n.lazy.close())
	}
	return err
}

// mkdir makes the node's dir, and the dirs of its pidfile and log, on
// its host.
func (n *Node) mkdir(ctx context.Context) error {
	err := n.host.Run(ctx, remote.Cmd{Path: "mkdir", Args: []string{"-p", "--", n.Dir, path.Dir(n.proc.Pidfile), path.Dir(n.log)}})
	if err != nil {
		return fmt.Errorf("compose: %s: %w", n.Name, err)
	}
	return nil
}
