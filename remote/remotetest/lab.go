// Package remotetest simulates hosts on this machine for tests of what
// lockbench does over SSH: each host is a network namespace with its own
// mount and PID namespaces, running a real sshd (Debian's openssh-server)
// as the first process of its PID namespace, on a bridge shared with the
// control node (this process).
//
// A host has its own /run and /tmp (tmpfs), its own /proc, and its own
// accounts: root; Sudoer, who may run anything through `sudo -n`; and
// Guest, who may not. Each lab generates its hosts' keys and one client
// key, authorized for every account of every host, and writes a
// known_hosts file that records every host's key.
//
// Nothing outlives the lab, however the test ends: each sshd gets SIGKILL
// when this process dies (a parent-death signal), and the end of a PID
// namespace's first process kills every process in it — servers started
// over SSH too; the namespaces and their links then go with the last
// holder; the control node's link and dir left by a killed process are
// swept by the next lab to claim a slot.
package remotetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lockbench/lockbench/internal/servertest"
	"github.com/lockbench/lockbench/remote"
)

// The accounts of a simulated host besides root.
const (
	// Sudoer may run any command as root through sudo without a
	// password (when sudo is installed).
	Sudoer = "bench"
	// Guest has no sudo.
	Guest = "guest"
)

// Lab is a set of simulated hosts and the control node's side of them.
type Lab struct {
	// Hosts are the hosts, named host1, host2, …
	Hosts []*Host
	// Control is this process's address on the lab's bridge.
	Control netip.Addr
	// Dir holds the control node's files: KeyFile, the client key every
	// account of every host authorizes, and KnownHosts, which records
	// every host's key.
	Dir, KeyFile, KnownHosts string
	// Key is the client key's public half.
	Key ssh.PublicKey

	slot   int
	sw     *os.File // the bridge's network namespace
	link   string
	closed bool
}

// Host is one simulated host.
type Host struct {
	// Name is host1, host2, …
	Name string
	// Addr is its address on the bridge, where its sshd listens on port
	// 22.
	Addr netip.Addr
	// HostKey is its sshd's key.
	HostKey ssh.PublicKey
	// Netns is its network namespace: remote.Local{Netns: h.Netns} runs
	// commands on this machine that see its network.
	Netns *os.File

	init   *exec.Cmd     // the namespace's first process: sshd
	exited chan struct{} // closed once init has been reaped
	log    *syncBuffer
}

// Option changes how New builds the hosts.
type Option func(*labConfig)

type labConfig struct {
	hide map[int][]string
}

// Hide makes paths absent on host i (0-based): each is covered by an
// empty, unreadable file or dir, for a test of what a host lacks (a
// binary, /dev/fuse).
func Hide(i int, paths ...string) Option {
	return func(c *labConfig) { c.hide[i] = append(c.hide[i], paths...) }
}

// Available returns nil when labs can run here, else why not: they need
// root and sshd.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("simulated hosts need root (namespaces, mounts)")
	}
	if _, err := os.Stat(sshdPath); err != nil {
		return fmt.Errorf("simulated hosts need sshd (Debian openssh-server): %w", err)
	}
	return nil
}

// SudoAvailable reports whether the hosts' Sudoer can use sudo: whether
// sudo is installed.
func SudoAvailable() bool {
	_, err := os.Stat("/usr/bin/sudo")
	return err == nil
}

// New starts a lab of n hosts for t, and closes it when t ends. Its
// sshds are servers: t StartsServers (servertest), so it is skipped
// under -short and has a deadline. It skips t when labs cannot run here.
func New(t testing.TB, n int, opts ...Option) *Lab {
	t.Helper()
	servertest.StartsServers(t)
	if err := Available(); err != nil {
		t.Skip(err)
	}
	l, err := Start(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

const sshdPath = "/usr/sbin/sshd"

// Start starts a lab of n hosts; Close ends it.
func Start(n int, opts ...Option) (_ *Lab, err error) {
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("remotetest: a lab of %d hosts: want 1 to 200", n)
	}
	cfg := labConfig{hide: map[int][]string{}}
	for _, o := range opts {
		o(&cfg)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	slot, err := claimSlot()
	if err != nil {
		return nil, err
	}
	l := &Lab{slot: slot, link: linkName(slot), Dir: slotDir(slot), Control: slotAddr(slot, 254)}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
		}
	}()
	if err := os.Mkdir(l.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("remotetest: %w", err)
	}
	if err := l.writeClientKey(); err != nil {
		return nil, err
	}
	if err := l.buildBridge(); err != nil {
		return nil, err
	}
	for i := range n {
		h, err := l.startHost(i, cfg.hide[i])
		if h != nil {
			l.Hosts = append(l.Hosts, h)
		}
		if err != nil {
			return nil, err
		}
	}
	var known strings.Builder
	for _, h := range l.Hosts {
		known.WriteString(h.KnownHostsLine() + "\n")
	}
	l.KnownHosts = filepath.Join(l.Dir, "known_hosts")
	if err := os.WriteFile(l.KnownHosts, []byte(known.String()), 0o644); err != nil {
		return nil, fmt.Errorf("remotetest: %w", err)
	}
	return l, nil
}

// writeClientKey makes the lab's client key.
func (l *Lab) writeClientKey() error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, "lockbench lab client")
	if err != nil {
		return err
	}
	l.KeyFile = filepath.Join(l.Dir, "id_ed25519")
	if err := os.WriteFile(l.KeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("remotetest: %w", err)
	}
	l.Key, err = ssh.NewPublicKey(pub)
	return err
}

func bg() context.Context { return context.Background() }

// ip runs `ip -batch` with cmds in r.
func ip(r remote.Remote, cmds ...string) error {
	return r.Run(bg(), remote.Cmd{Path: "ip", Args: []string{"-batch", "-"}, Stdin: strings.NewReader(strings.Join(cmds, "\n") + "\n")})
}

// buildBridge makes the bridge in a namespace of its own and links the
// control node to it: the link is a veth pair whose far end is in that
// namespace, so both ends go when it does.
func (l *Lab) buildBridge() error {
	sw, err := remote.NewNetns()
	if err != nil {
		return err
	}
	l.sw = sw
	if err := ip(remote.Local{Netns: sw}, "link set lo up", "link add br0 type bridge", "link set br0 up"); err != nil {
		return fmt.Errorf("remotetest: the lab's bridge: %w", err)
	}
	// ip names a namespace by a path: this process's descriptor of it.
	nsPath := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), sw.Fd())
	if err := ip(remote.Local{}, fmt.Sprintf("link add %s type veth peer name uplink netns %s", l.link, nsPath)); err != nil {
		return fmt.Errorf("remotetest: the control node's link: %w", err)
	}
	if err := ip(remote.Local{Netns: sw}, "link set uplink master br0", "link set uplink up"); err != nil {
		return fmt.Errorf("remotetest: the lab's uplink: %w", err)
	}
	return ip(remote.Local{}, fmt.Sprintf("addr add %s/24 dev %s", l.Control, l.link), "link set "+l.link+" up")
}

// Close kills every host (and so every process on it), deletes the
// control node's link, lets the namespaces go and removes Dir.
func (l *Lab) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, h := range l.Hosts {
		errs = append(errs, h.stop())
	}
	errs = append(errs, deleteLink(l.link))
	if l.sw != nil {
		errs = append(errs, l.sw.Close())
	}
	if l.Dir != "" {
		errs = append(errs, os.RemoveAll(l.Dir))
	}
	releaseSlot(l.slot)
	return errors.Join(errs...)
}

// SSHConfig is how to reach host i as user with the lab's client key,
// the host's key verified against the lab's known_hosts.
func (l *Lab) SSHConfig(i int, user string) remote.SSHConfig {
	h := l.Hosts[i]
	return remote.SSHConfig{
		Name: h.Name, Addr: h.Addr.String(), User: user,
		IdentityFiles: []string{l.KeyFile}, KnownHosts: []string{l.KnownHosts},
	}
}

// Dial connects to host i as user, for t.
func (l *Lab) Dial(t testing.TB, i int, user string) *remote.SSH {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), time.Minute)
	defer cancel()
	s, err := remote.DialSSH(ctx, l.SSHConfig(i, user))
	if err != nil {
		t.Fatalf("dial %s as %s: %v\nsshd log:\n%s", l.Hosts[i].Name, user, err, l.Hosts[i].Log())
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// KnownHostsLine is the host's known_hosts entry.
func (h *Host) KnownHostsLine() string {
	return knownLine(h.Addr.String(), h.HostKey)
}

func knownLine(host string, k ssh.PublicKey) string {
	return host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// Log is what the host's sshd has logged.
func (h *Host) Log() string {
	if h.log == nil {
		return ""
	}
	return h.log.String()
}

// Pid is the host's sshd's pid here: the first process of its PID
// namespace.
func (h *Host) Pid() int { return h.init.Process.Pid }
