package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/remote"
)

// Hosts is a run's hosts beyond this machine, as an inventory names them,
// each reached over SSH from this control node as Jepsen reaches its
// nodes: the servers of a backend go where the inventory puts them
// (compose placements), the client workers run on the client hosts, and
// the judge runs on the host given the judge role (StartJudge), or here,
// in the runner, when none is. Hosts remembers what the run put
// on each host, so that Close takes it all down — or, for a host whose
// link broke, says what is left there and how the next run clears it.
type Hosts struct {
	inv    *inventory.Inventory
	log    io.Writer
	hosts  []*Host
	binary string // HostsOptions.Binary

	mu     sync.Mutex
	placed []placed   // servers started on the hosts
	judge  *hostJudge // the judge, when it runs on a host
}

// Host is one host of a run.
type Host struct {
	// Name is its name in the inventory.
	Name string
	// SSH is the control node's connection to it.
	SSH *remote.SSH
	// Addr is where the other hosts and the control node reach its
	// servers: the address of its sshd.
	Addr netip.Addr
	// Binary is the lockbench binary on it, uploaded by DialHosts to the
	// hosts that run clients, the judge or servers ("" on the others):
	// a server's proxy and its lazy filesystem are lockbench too.
	Binary string
	// WorkDir is where the run keeps its files there.
	WorkDir string

	cfg inventory.Host
}

// placed is a server a run started on a host.
type placed struct {
	host, name, pidfile string
}

// HostsOptions says how DialHosts prepares the hosts.
type HostsOptions struct {
	// Binary is the lockbench binary (on this machine) that the client
	// hosts run their workers with, and the judge's host its judge: a static one (CGO_ENABLED=0), which
	// runs on any Linux of its architecture.
	Binary string
	// Log is told what is done on the hosts and what is left there.
	Log io.Writer
	// KeepAlive is how often each link is probed: one left unanswered
	// for three periods breaks it, and the run stops (Watch). 0 is
	// remote's default, 5 s (15 s without an answer).
	KeepAlive time.Duration
}

// DialHosts connects to every host of inv at once (host keys verified),
// clears what an earlier run may have left there (cuts, workers, a judge:
// see sweep) and uploads the lockbench binary to the client, judge and
// server hosts that lack it (a server's proxy is lockbench too). Every
// host keeps its path to the judge's host whatever a partition cuts. The error names each host that failed.
func DialHosts(ctx context.Context, inv *inventory.Inventory, o HostsOptions) (_ *Hosts, err error) {
	hs := &Hosts{inv: inv, log: o.Log, binary: o.Binary}
	if hs.log == nil {
		hs.log = io.Discard
	}
	// Clients and the judge run lockbench, and so does the proxy beside
	// each server (lockbench proxy).
	runsLockbench := func(h inventory.Host) bool { return h.Clients || h.Judge != nil || len(h.Servers) > 0 }
	needBinary := slices.ContainsFunc(inv.Hosts, runsLockbench)
	var binary []byte
	var sum string
	if needBinary {
		if binary, err = staticBinary(o.Binary); err != nil {
			return nil, err
		}
		s := sha256.Sum256(binary)
		sum = hex.EncodeToString(s[:8])
	}
	// The judge's host stays reachable from every host, whatever is cut.
	var keep []netip.Addr
	for _, cfg := range inv.Hosts {
		if cfg.Judge != nil {
			a, err := hostAddr(ctx, cfg)
			if err != nil {
				return nil, fmt.Errorf("host %s: %w", cfg.Name, err)
			}
			keep = append(keep, a)
		}
	}
	hs.hosts = make([]*Host, len(inv.Hosts))
	errs := make([]error, len(inv.Hosts))
	var wg sync.WaitGroup
	for i, cfg := range inv.Hosts {
		wg.Go(func() {
			h, err := dialHost(ctx, cfg, o.KeepAlive, keep)
			if err == nil {
				hs.hosts[i] = h
				err = h.sweep(ctx, hs.log)
			}
			if err == nil && runsLockbench(cfg) {
				h.Binary, err = h.upload(ctx, "lockbench", binary, sum)
			}
			if err != nil {
				errs[i] = fmt.Errorf("host %s: %w", cfg.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		hs.closeAll()
		return nil, err
	}
	return hs, nil
}

// staticBinary reads the lockbench binary at p, refusing one linked
// against this machine's C library: a host may have another, or none.
func staticBinary(p string) ([]byte, error) {
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("the lockbench binary to upload: %w", err)
		}
		p = exe
	}
	f, err := elf.Open(p)
	if err != nil {
		return nil, fmt.Errorf("the lockbench binary to upload, %s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is linked dynamically: the hosts need a static lockbench (CGO_ENABLED=0 go build ./cmd/lockbench, as make "+
				"build does)", p)
		}
	}
	return os.ReadFile(p)
}

// hostAddr is the address of cfg's sshd.
func hostAddr(ctx context.Context, cfg inventory.Host) (netip.Addr, error) {
	hostPart, _, err := net.SplitHostPort(cfg.Address)
	if err != nil {
		return netip.Addr{}, err
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", hostPart)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("address %s: %v", hostPart, err)
	}
	return addrs[0].Unmap(), nil
}

// dialHost connects to one host and finds its address; keepAlive, when
// not zero, replaces the link's keepalive period (remote.SSHConfig), and
// the host keeps its paths to keep whatever a partition cuts.
func dialHost(ctx context.Context, cfg inventory.Host, keepAlive time.Duration, keep []netip.Addr) (*Host, error) {
	addr, err := hostAddr(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sc := cfg.SSHConfig()
	if keepAlive != 0 {
		sc.KeepAlive = keepAlive
	}
	sc.Keep = append(sc.Keep, keep...)
	s, err := remote.DialSSH(ctx, sc)
	if err != nil {
		return nil, err
	}
	return &Host{Name: cfg.Name, SSH: s, Addr: addr, WorkDir: cfg.WorkDir, cfg: cfg}, nil
}

// workersDir is where the workers of every run keep their files on h.
func (h *Host) workersDir() string { return path.Join(h.WorkDir, "workers") }

// sweep clears what an earlier run left on h when its link broke: the
// cuts in force (every blackhole rule of remote.CutPref), and the workers
// and judge its pidfiles name. (A server an earlier run left is killed by its
// pidfile when this run first starts one there: compose does it.)
func (h *Host) sweep(ctx context.Context, log io.Writer) error {
	cuts, err := remote.CutsInForce(ctx, h.SSH)
	if err != nil {
		return err
	}
	if len(cuts) > 0 {
		if err := remote.HealPaths(ctx, h.SSH); err != nil {
			return err
		}
		fmt.Fprintf(log, "lockbench: %s: lifted %d cuts an earlier run left: %v\n", h.Name, len(cuts), cuts)
	}
	out, err := remote.Output(ctx, h.SSH, "sh", "-c", `for f in "$1"/*/*.pid; do [ -e "$f" ] && echo "$f"; done; true`, "sh", h.workersDir())
	if err != nil {
		return err
	}
	for _, pf := range strings.Fields(string(out)) {
		p := remote.Proc{Remote: h.SSH, Pidfile: pf}
		if st, err := p.State(ctx); err == nil && st != remote.Gone {
			fmt.Fprintf(log, "lockbench: %s: killing a worker an earlier run left (%s)\n", h.Name, pf)
		}
		if err := p.Kill(ctx); err != nil {
			return err
		}
	}
	return h.SSH.Run(ctx, remote.Cmd{Path: "rm", Args: []string{"-rf", "--", h.workersDir()}})
}

// upload puts a program on h, as <work dir>/bin/<name>-<sum> (sum: the
// start of its hash), unless it is there already, and returns its path
// there.
func (h *Host) upload(ctx context.Context, name string, binary []byte, sum string) (string, error) {
	p := path.Join(h.WorkDir, "bin", name+"-"+sum)
	if err := h.SSH.Run(ctx, remote.Cmd{Path: "test", Args: []string{"-x", p}}); err == nil {
		return p, nil
	}
	return p, remote.Upload(ctx, h.SSH, bytes.NewReader(binary), p, 0o755)
}

// provideLockbench uploads the lockbench binary to the host of each
// placement in pl that lacks it, and names it there (Placement.Lockbench):
// it serves the lazy filesystems of servers that can lose power.
func (hs *Hosts) provideLockbench(ctx context.Context, pl []compose.Placement) error {
	return hs.provide(ctx, pl, "lockbench", func() (string, error) { return hs.binary, nil },
		func(p *compose.Placement) *string { return &p.Lockbench })
}

// provide uploads the static program that file names on this machine to
// the host of each placement in pl whose field (a path on its host) is
// empty, as the lockbench binary is uploaded (by its hash, under the
// host's work dir), and sets that field to its path there.
func (hs *Hosts) provide(ctx context.Context, pl []compose.Placement, name string, file func() (string, error),
	field func(*compose.Placement) *string) error {
	var binary []byte
	var sum string
	for i := range pl {
		dst := field(&pl[i])
		if *dst != "" {
			continue
		}
		if binary == nil {
			f, err := file()
			if err != nil {
				return err
			}
			if binary, err = staticBinary(f); err != nil {
				return err
			}
			s := sha256.Sum256(binary)
			sum = hex.EncodeToString(s[:8])
		}
		k := slices.IndexFunc(hs.hosts, func(h *Host) bool { return h.SSH == pl[i].Host })
		if k < 0 {
			return fmt.Errorf("host %s is not one of the inventory's", pl[i].Host.Name())
		}
		h := hs.hosts[k]
		p, err := h.upload(ctx, name, binary, sum)
		if err != nil {
			return fmt.Errorf("host %s: upload %s: %w", h.Name, name, err)
		}
		*dst = p
	}
	return nil
}

// Host returns the host called name, or nil.
func (hs *Hosts) Host(name string) *Host {
	for _, h := range hs.hosts {
		if h != nil && h.Name == name {
			return h
		}
	}
	return nil
}

// Clients are the hosts that run client workers, in inventory order.
func (hs *Hosts) Clients() []*Host {
	var out []*Host
	for _, h := range hs.hosts {
		if h.cfg.Clients {
			out = append(out, h)
		}
	}
	return out
}

// Serves reports whether the inventory puts servers of backend name on
// the hosts.
func (hs *Hosts) Serves(name string) bool {
	for _, h := range hs.inv.Hosts {
		for _, s := range h.Servers {
			if s.Backend == name {
				return true
			}
		}
	}
	return false
}

// Placements are where the servers of backend name go, one per server
// the inventory lists for it, in inventory order: n of them, or an error
// naming what is missing. Each server's clients are the client hosts,
// and a proxy beside it (at its proxy_port) lets a latency fault slow
// them.
func (hs *Hosts) Placements(name string, n int) ([]compose.Placement, error) {
	var clients []compose.Peer
	for _, h := range hs.Clients() {
		clients = append(clients, compose.Peer{Host: h.SSH, Addr: h.Addr})
	}
	var out []compose.Placement
	for _, h := range hs.hosts {
		for _, s := range h.cfg.Servers {
			if s.Backend != name {
				continue
			}
			var peers []int // 0: the kind's standard port
			switch {
			case s.PeerPort != 0 || s.ElectionPort != 0:
				peers = []int{s.PeerPort, s.ElectionPort}
			case s.SentinelPort != 0: // a Sentinel node's sentinel
				peers = []int{s.SentinelPort}
			}
			out = append(out, compose.Placement{
				Host: h.SSH, Addr: h.Addr, Port: s.Port, PeerPorts: peers, Dir: s.Data, Binary: s.Binary,
				ClockPreload: h.cfg.ClockPreload, Clients: clients,
				Lockbench: h.Binary, Proxy: &compose.PlacedProxy{Port: s.ProxyPort},
			})
		}
	}
	if len(out) != n {
		return nil, configErrorf("backend %s runs on %d servers, and the inventory %s lists %d for it", name, n, hs.inv.Path, len(out))
	}
	return out, nil
}

// started notes the servers of nodes, for Close's account of a host whose
// link broke.
func (hs *Hosts) started(nodes []*compose.Node) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, n := range nodes {
		hs.placed = append(hs.placed, placed{host: n.Host().Name(), name: n.Name, pidfile: n.Pidfile()})
		if p := n.Proxy(); p != nil {
			hs.placed = append(hs.placed, placed{host: n.Host().Name(), name: p.Name, pidfile: p.Pidfile()})
		}
		if pf := n.LazyFSPidfile(); pf != "" {
			hs.placed = append(hs.placed, placed{host: n.Host().Name(), name: n.Name + "'s lazy filesystem", pidfile: pf})
		}
	}
}

// JudgeAddr is where workers on h reach a judge listening on this
// machine at listen (host:port): this machine's address as h sees it.
func (h *Host) JudgeAddr(listen string) (string, error) {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	a := h.SSH.ControlAddr()
	if !a.IsValid() {
		return "", fmt.Errorf("host %s: this machine's address as it sees it is unknown", h.Name)
	}
	return net.JoinHostPort(a.String(), port), nil
}

// Keep are the addresses no cut may take from h's host: the judge's (this
// machine's, as SSH keeps anyway).
func (h *Host) Keep() []netip.Addr { return h.SSH.Kept() }

// Watch returns a context that ends, with a cause naming the host, when
// the link to a host breaks: a run over several hosts stops and tears
// down when it loses one.
func (hs *Hosts) Watch(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	for _, h := range hs.hosts {
		go func() {
			select {
			case <-h.SSH.Done():
				if err := h.SSH.Err(); err != nil {
					cancel(fmt.Errorf("the link to host %s broke: %w", h.Name, err))
				}
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() { cancel(nil) }
}

// Close takes down what the run left on the hosts — its workers, its
// cuts — and closes the links. The servers are compose's (Env.Close kills
// them first). For a host whose link broke its error says what is left
// running there and how the next run clears it.
func (hs *Hosts) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make([]error, len(hs.hosts))
	var wg sync.WaitGroup
	for i, h := range hs.hosts {
		if h == nil {
			continue
		}
		wg.Go(func() {
			if h.SSH.Err() != nil {
				errs[i] = hs.leftOn(h)
				return
			}
			err := h.sweep(ctx, io.Discard)
			if err != nil && h.SSH.Err() != nil {
				err = hs.leftOn(h)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	hs.closeAll()
	return errors.Join(errs...)
}

// leftOn says what the run may have left on h, whose link broke.
func (hs *Hosts) leftOn(h *Host) error {
	hs.mu.Lock()
	var servers []string
	for _, p := range hs.placed {
		if p.host == h.Name {
			servers = append(servers, fmt.Sprintf("%s (pidfile %s)", p.name, p.pidfile))
		}
	}
	hs.mu.Unlock()
	workers := "workers under " + h.workersDir() + " (they end by themselves when their case is long over)"
	if j := hs.judgeLeftOn(h); j != "" {
		workers = j + "; " + workers
	}
	msg := fmt.Sprintf("the link to host %s broke: what the run started there may still run — servers %s; %s; cuts of "+
		"rule priority %d. the "+
		"next run against this inventory kills them by their pidfiles and lifts the cuts as it starts",
		h.Name, strings.Join(servers, ", "), workers, remote.CutPref)
	if len(servers) == 0 {
		msg = strings.Replace(msg, "servers ; ", "", 1)
	}
	return errors.New(msg)
}

func (hs *Hosts) closeAll() {
	for _, h := range hs.hosts {
		if h != nil {
			h.SSH.Close()
		}
	}
}
