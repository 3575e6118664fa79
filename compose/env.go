package compose

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/lockbench/lockbench/remote"
)

// ReadyTimeout bounds how long a node may take to become ready after it is
// started (a JVM-based ZooKeeper server is the slowest).
const ReadyTimeout = 60 * time.Second

// Env owns the servers of one test or run: their directories under Dir,
// their processes and proxies. Close stops them all.
type Env struct {
	// Dir is the run dir: one sub-directory per node (data and config) and
	// one log file per node.
	Dir string
	// Programs are the servers' programs; New sets DefaultPrograms.
	// Change them before the first server starts.
	Programs Programs

	mu      sync.Mutex
	nodes   []*Node
	proxies *proxies
	nets    []*peerNet // the Netns clusters' networks
	// cleanups lift what was registered with Cleanup: cuts between
	// hosts, in force until Close.
	cleanups []func() error
	names    map[string]int // next index per node name prefix
	closed   bool
	// extraDirs are dirs made on hosts beside the nodes' (the clock
	// preload's), which Close removes.
	extraDirs []hostDir

	preloadMu sync.Mutex
	preloads  map[string]string // the clock preload's path, by host name
}

// hostDir is a dir on a host.
type hostDir struct {
	host remote.Remote
	dir  string
}

// New returns an Env whose nodes live under dir, which is created if
// needed and must be empty.
func New(dir string) (*Env, error) {
	if dir == "" {
		return nil, fmt.Errorf("compose: empty run dir")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("compose: run dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("compose: run dir %q: %w", dir, err)
	}
	// A node's files from an earlier run (a config Sentinel rewrote, a
	// node's data) would be taken for this run's: start from nothing.
	if entries, err := os.ReadDir(abs); err != nil || len(entries) > 0 {
		return nil, fmt.Errorf("compose: run dir %q is not empty: give a new or empty one", dir)
	}
	return &Env{Dir: abs, Programs: DefaultPrograms()}, nil
}

// Nodes returns every node started in this Env, in start order.
func (e *Env) Nodes() []*Node {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Node(nil), e.nodes...)
}

// NewNames returns n fresh node names "prefix-i", unique in this Env:
// a kind's package names its nodes with them (NodeSpec.Name).
func (e *Env) NewNames(prefix string, n int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.names == nil {
		e.names = map[string]int{}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, e.names[prefix])
		e.names[prefix]++
	}
	return names
}

func (e *Env) add(n *Node) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("compose: env %s is closed", e.Dir)
	}
	e.nodes = append(e.nodes, n)
	return nil
}

// Cleanup registers f for Close to call, before it kills the nodes, the
// last registered first, as testing.T.Cleanup orders them: what lifts a
// cut that rules on hosts hold in force (a held-back link, a partition
// between placed members), which would outlive the run. f registered
// after Close is called at once, and its error returned.
func (e *Env) Cleanup(f func() error) error {
	e.mu.Lock()
	if !e.closed {
		e.cleanups = append(e.cleanups, f)
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	return f()
}

// NodeDir is the dir the node ns describes will have, on its host, known
// before the node starts: its placement's, its own (NodeSpec.Dir), or
// <run dir>/<name>.
func (e *Env) NodeDir(ns NodeSpec) string {
	switch {
	case ns.place != nil:
		return ns.place.Dir
	case ns.Dir != "":
		return ns.Dir
	}
	return filepath.Join(e.Dir, ns.Name)
}

// Close kills every node's process group, stops every proxy, removes the
// Netns clusters' networks (namespaces, links, routes) and the dirs
// of nodes that live outside the run dir. It waits for the processes to
// exit. Calls after the first return nil.
func (e *Env) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	nodes, px, nets, cleanups := e.nodes, e.proxies, e.nets, e.cleanups
	e.mu.Unlock()

	var errs []error
	for _, f := range slices.Backward(cleanups) {
		errs = append(errs, f())
	}
	for _, n := range nodes {
		if err := n.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range nodes {
		if n.lazy != nil {
			errs = append(errs, n.lazy.close())
		}
	}
	if px != nil {
		errs = append(errs, px.close())
	}
	for _, p := range nets {
		if err := p.close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range nodes {
		if n.spec.Dir != "" { // a node dir outside the run dir goes with the Env
			errs = append(errs, removeDirs(n))
		} else if n.clock != nil {
			errs = append(errs, removeDir(n.host, clockDir(n)))
		}
	}
	e.mu.Lock()
	extra := e.extraDirs
	e.extraDirs = nil
	e.mu.Unlock()
	for _, d := range extra {
		errs = append(errs, removeDir(d.host, d.dir))
	}
	return errors.Join(errs...)
}

// Prune removes the data of every node that never failed (see
// Node.Failed), keeping the logs and the data of the failed ones, for
// diagnosis; it returns the names of the nodes whose data it kept. Call
// it after Close: a run's servers write hundreds of megabytes that nobody
// reads once the run is over.
func (e *Env) Prune() ([]string, error) {
	var kept []string
	var errs []error
	for _, n := range e.Nodes() {
		if n.Running() {
			errs = append(errs, fmt.Errorf("compose: prune %s: still running", n.Name))
			continue
		}
		if n.Failed() {
			kept = append(kept, n.Name)
			continue
		}
		errs = append(errs, removeDirs(n))
	}
	return kept, errors.Join(errs...)
}

// removeDirs removes a stopped node's dir, its clock dir and, if it has
// a lazy filesystem (unmounted by then), its disk, on its host.
func removeDirs(n *Node) error {
	dirs := []string{n.Dir, clockDir(n)}
	if n.spec.place != nil {
		// Its files beside its dir, on its host: the run has its log.
		dirs = append(dirs, n.proc.Pidfile, n.log)
	}
	if n.lazy != nil {
		dirs = append(dirs, n.lazy.leftovers()...)
	}
	return removeDir(n.host, dirs...)
}

// removeDir removes dirs on host h, and what they hold. On this machine
// it does so outside any network namespace h runs in: files need none,
// and Close removes them after the namespaces are gone.
func removeDir(h remote.Remote, dirs ...string) error {
	if l, ok := h.(remote.Local); ok {
		l.Netns = nil
		h = l
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := h.Run(ctx, remote.Cmd{Path: "rm", Args: append([]string{"-rf", "--"}, dirs...)}); err != nil {
		return fmt.Errorf("compose: remove %v on %s: %w", dirs, h.Name(), err)
	}
	return nil
}

// peerNet builds a network for a Netns cluster of n members, which
// Close removes.
func (e *Env) peerNet(n int) (*peerNet, error) {
	p, err := newPeerNet(n)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.Join(fmt.Errorf("compose: env %s is closed", e.Dir), p.close())
	}
	e.nets = append(e.nets, p)
	return p, nil
}
