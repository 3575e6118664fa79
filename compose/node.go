package compose

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// spec says how to run one node; the topology files build it.
type spec struct {
	name string
	kind kind
	// port is the port clients use (the proxy's port when the node is
	// proxied); the topology may use more ports internally.
	port int
	// host is the address the server listens on; "" means 127.0.0.1.
	host string
	// net, when set, is the network whose member-th namespace the server
	// runs in (a PeerNetwork cluster's member, a server started with
	// Netns); nil is this process's namespace.
	net    *peerNet
	member int
	bin    string
	args   []string
	env    []string
	// prepare writes the node's configuration into its dir before each
	// start (the dir may just have been wiped).
	prepare func(dir string) error
	// argv, when set, replaces args at each start, after prepare: for a
	// server whose command line depends on what prepare found.
	argv func() []string
	// ready returns nil once the node serves requests.
	ready func(ctx context.Context) error
	// dir, when set, is the node's dir instead of <run dir>/<name>: a
	// server that runs as another user (cred) must be able to reach it,
	// and a run dir may lie under a dir only we can enter. Env.Close
	// removes it.
	dir string
	// cred, when set, runs the server as that user and group: PostgreSQL
	// refuses to run as root.
	cred *syscall.Credential
	// term is the signal that asks the server to shut down; 0 means
	// SIGTERM.
	term syscall.Signal
	// procs, when set, lists the server's processes outside its process
	// group, which Kill, Pause and Resume must reach too: each child of
	// a PostgreSQL server starts a session of its own.
	procs func() []int
	// lazyFS puts the node's dir on a lazy filesystem (PowerLoss).
	lazyFS bool
	// fakeClock runs the server under the clock preload (JumpClock).
	fakeClock bool
	// clock, when set, reads the server's wall clock at addr
	// (ServerTime).
	clock func(ctx context.Context, addr string) (time.Time, error)
}

// Node is one server process. Its controls are safe for concurrent use.
type Node struct {
	// Name identifies the node in logs and results, e.g. "redis-2".
	Name string
	// Dir is the node's data and config dir; Restart(false) wipes it.
	Dir string
	// Port is the port the server listens on.
	Port int

	env   *Env
	spec  spec
	proxy *Proxy     // nil unless the node is proxied
	lazy  *lazyFS    // nil unless its dir is on a lazy filesystem
	clock *nodeClock // nil unless it runs on a fake clock

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	paused bool
	// stopping is set while Kill or Stop ends the process; failed once
	// the server did not start, or exited when nobody stopped it.
	stopping, failed bool
}

// Failed reports whether the server ever failed: did not become ready,
// or exited when nobody stopped it. Its data is then worth keeping.
func (n *Node) Failed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.failed
}

// Addr is the address clients should dial: the proxy in front of the node
// if it has one, the server itself otherwise.
func (n *Node) Addr() string {
	if n.proxy != nil {
		return n.proxy.Addr()
	}
	return n.ServerAddr()
}

// ServerAddr is the server's own address, bypassing any proxy: on
// 127.0.0.1, or the member's own address in a PeerNetwork cluster.
func (n *Node) ServerAddr() string { return hostAddr(n.spec.host, n.Port) }

// hostAddr is host:port, host "" being 127.0.0.1.
func hostAddr(host string, port int) string {
	if host == "" {
		return addr(port)
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// PID returns the server's process id, or 0 when it is not running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the server process is alive (paused counts).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// LogTail returns the last max bytes of the node's log.
func (n *Node) LogTail(max int64) string {
	f, err := os.Open(filepath.Join(n.env.Dir, n.Name+".log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	return tail(f, max)
}

// kind is the sort of server a node runs, for controls that only some
// servers support.
type kind int

const (
	kindOther kind = iota
	kindRedis
)

// startNode registers a node in e, puts a proxy in front of it when asked,
// and starts it.
func (e *Env) startNode(ctx context.Context, s spec, proxied bool) (*Node, error) {
	n, err := e.newNode(s, proxied)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// startNodes starts the nodes of specs together and waits until every one
// is ready. Members of a quorum system (ZooKeeper, etcd) need it: none is
// ready before a majority runs.
func (e *Env) startNodes(ctx context.Context, specs []spec, proxied bool) ([]*Node, error) {
	nodes := make([]*Node, len(specs))
	for i, s := range specs {
		n, err := e.newNode(s, proxied)
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

// newNode registers a node in e, with its dir and, when asked, a proxy in
// front of it, without starting it.
func (e *Env) newNode(s spec, proxied bool) (*Node, error) {
	n := &Node{Name: s.name, Dir: filepath.Join(e.Dir, s.name), Port: s.port, env: e, spec: s}
	if s.dir != "" {
		n.Dir = s.dir
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("compose: %s: %w", s.name, err)
	}
	if err := e.add(n); err != nil {
		return nil, err
	}
	if s.lazyFS {
		lazy, err := newLazyFS(diskOf(n.Dir), n.Dir)
		if err != nil {
			return nil, fmt.Errorf("compose: %s: %w", s.name, err)
		}
		n.lazy = lazy
	}
	if s.fakeClock {
		c, err := newNodeClock()
		if err != nil {
			return nil, fmt.Errorf("compose: %s: %w", s.name, err)
		}
		n.clock = c
	}
	if proxied {
		p, err := e.Proxy(s.name+"-proxy", n.ServerAddr())
		if err != nil {
			return nil, err
		}
		n.proxy = p
	}
	return n, nil
}

// Start starts the server if it is not running and waits until it is
// ready, ctx ends or ReadyTimeout passes.
//
// A node on a lazy filesystem then has its disk written back: a power
// loss drops only what the server wrote since it was ready and did not
// sync, as on a machine that has been up for a while.
func (n *Node) Start(ctx context.Context) error {
	if err := n.spawn(); err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	return n.settle()
}

// settle writes the node's lazy filesystem back, if it has one.
func (n *Node) settle() error {
	if n.lazy == nil {
		return nil
	}
	if err := n.lazy.writebackAll(); err != nil {
		return fmt.Errorf("compose: write back the disk of %s: %w", n.Name, err)
	}
	return nil
}

func (n *Node) spawn() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	if n.spec.prepare != nil {
		if err := n.spec.prepare(n.Dir); err != nil {
			return fmt.Errorf("compose: prepare %s: %w", n.Name, err)
		}
	}
	log, err := n.env.logFile(n.Name)
	if err != nil {
		return fmt.Errorf("compose: log of %s: %w", n.Name, err)
	}
	defer log.Close() // the child keeps its own descriptor
	args := n.spec.args
	if n.spec.argv != nil {
		args = n.spec.argv()
	}
	fmt.Fprintf(log, "=== %s start: %s %v\n", time.Now().Format(time.RFC3339Nano), n.spec.bin, args)
	cmd := exec.Command(n.spec.bin, args...)
	cmd.Dir = n.Dir
	if n.lazy != nil {
		// Not on the lazy filesystem: between fork and exec the child
		// shares our memory (Go forks with vfork), and a garbage
		// collection then waits for the thread that forked while the
		// child's chdir waits for us to answer its FUSE request.
		cmd.Dir = filepath.Dir(n.Dir)
	}
	cmd.Env = append(os.Environ(), n.spec.env...)
	if n.clock != nil {
		if err := n.clock.prepare(cmd); err != nil {
			return fmt.Errorf("compose: clock of %s: %w", n.Name, err)
		}
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so Kill reaches any child it forks; and a
	// parent-death signal, so it dies with us even if we are SIGKILLed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: n.spec.cred}
	start := cmd.Start
	if n.spec.net != nil {
		// Forked from a thread inside the namespace, the server is born
		// in it; the parent-death signal and the group stay as above.
		start = func() error { return n.spec.net.members[n.spec.member].do(cmd.Start) }
	}
	if err := start(); err != nil {
		return fmt.Errorf("compose: start %s (%s): %w", n.Name, n.spec.bin, err)
	}
	exited := make(chan struct{})
	go n.await(cmd, exited)
	n.cmd, n.exited, n.paused = cmd, exited, false
	return nil
}

// await reaps the server's process and closes exited; an exit nobody
// asked for makes the node failed.
func (n *Node) await(cmd *exec.Cmd, exited chan struct{}) {
	_ = cmd.Wait()
	n.mu.Lock()
	if n.cmd == cmd && !n.stopping {
		n.failed = true
	}
	n.mu.Unlock()
	close(exited)
}

func (n *Node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, time.Second)
		last = n.spec.ready(probeCtx)
		probeCancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			n.reap()
			return fmt.Errorf("compose: %s exited before it was ready (%v); log:\n%s", n.Name, last, n.LogTail(1024))
		case <-ctx.Done():
			n.mu.Lock()
			n.failed = true
			n.mu.Unlock()
			return fmt.Errorf("compose: %s not ready: %w (last probe: %v); log:\n%s", n.Name, ctx.Err(), last, n.LogTail(1024))
		case <-tick.C:
		}
	}
}

// reap forgets a process that has exited on its own.
func (n *Node) reap() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited != nil {
		select {
		case <-n.exited:
			n.cmd, n.exited = nil, nil
		default:
		}
	}
}

// signal sends sig to the node's process group.
func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("compose: %s is not running", n.Name)
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("compose: signal %v to %s: %w", sig, n.Name, err)
	}
	return nil
}

// Kill sends SIGKILL to the node's process group and waits for the server
// to exit: a crash, with no chance to save anything. Killing a node that
// is not running does nothing.
func (n *Node) Kill() error { return n.stop(syscall.SIGKILL) }

// Stop asks the server to shut down (SIGTERM) and waits for it to exit,
// killing it if it takes longer than 10 s.
func (n *Node) Stop() error { return n.stop(cmp.Or(n.spec.term, syscall.SIGTERM)) }

func (n *Node) stop(sig syscall.Signal) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.stopping = cmd != nil
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	pgid := cmd.Process.Pid
	// The server's children outside its group, even those on their way
	// out (no longer in the working dir procs looks at): Kill waits for
	// them too.
	var children []int
	if n.spec.procs != nil {
		children = childrenOf(pgid)
	}
	_ = syscall.Kill(-pgid, sig)
	if sig != syscall.SIGKILL {
		_ = syscall.Kill(-pgid, syscall.SIGCONT) // a paused server cannot shut down
		n.signalProcs(syscall.SIGCONT)
	} else {
		n.signalProcs(sig)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// Children the server forked (a Redis save, say) die with the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	err := n.killProcs(children)
	n.mu.Lock()
	if n.cmd == cmd {
		n.cmd, n.exited, n.paused = nil, nil, false
	}
	n.stopping = false
	n.mu.Unlock()
	return err
}

// Restart kills the server and starts it again. With keepData false its
// dir is wiped first, so it comes back empty (what a node without
// persistence looks like after a crash); with keepData true it recovers
// whatever it had persisted.
func (n *Node) Restart(ctx context.Context, keepData bool) error {
	if err := n.Kill(); err != nil {
		return err
	}
	if !keepData {
		if err := n.Wipe(); err != nil {
			return err
		}
	}
	return n.Start(ctx)
}

// Wipe removes the data of a stopped node: its next start finds an empty
// dir, as a server given a new disk does.
func (n *Node) Wipe() error {
	if n.Running() {
		return fmt.Errorf("compose: wipe %s: it is running", n.Name)
	}
	if n.lazy != nil {
		return n.lazy.wipe()
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		return fmt.Errorf("compose: wipe %s: %w", n.Name, err)
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("compose: wipe %s: %w", n.Name, err)
	}
	return nil
}
