package compose

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/lockbench/lockbench/remote"
)

// A netns is a network namespace that this process created and holds by a
// file descriptor, without naming it under /run/netns. The kernel frees it,
// with every link in it, once the descriptor is closed and no process runs
// in it; the processes compose starts in it die with the run (their
// parent-death signal), so a namespace never outlives the process that
// made it, however that process ends. To look into one while it lives:
// `lsns -t net`, or `nsenter -t <member pid> -n ip addr`.
type netns struct {
	f *os.File
}

// newNetns creates an empty network namespace (not even its loopback is
// up).
func newNetns() (*netns, error) {
	f, err := remote.NewNetns()
	if err != nil {
		return nil, err
	}
	return &netns{f: f}, nil
}

// do runs f on a thread that is inside ns: a socket f opens, or a process
// f starts (exec.Cmd.Start), belongs to ns.
func (ns *netns) do(f func() error) error { return remote.InNetns(ns.f, f) }

// host is ns as a Remote: commands and servers started through it run in
// it.
func (ns *netns) host(name string) remote.Local { return remote.Local{Host: name, Netns: ns.f} }

// inode identifies the namespace, as /proc/<pid>/ns/net links name it
// ("net:[inode]").
func (ns *netns) inode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.f.Fd()), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// close lets the kernel free the namespace once no process runs in it.
func (ns *netns) close() error { return ns.f.Close() }

// ipBinary is the ip command of iproute2. Debian puts it in /usr/sbin (or
// /sbin), which a non-login shell's PATH may lack.
var ipBinary = sync.OnceValues(func() (string, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", errors.New("no ip command: install iproute2 (make deps)")
})

// ip runs the commands (ip's own syntax, without "ip") in one `ip -batch`
// inside ns, or in the host's namespace when ns is nil. The files in pass
// are the child's /proc/self/fd/3, 4, …, so that a command can name another
// namespace (`netns /proc/self/fd/3`) that has no name nor process.
func ip(ns *netns, cmds []string, pass ...*os.File) error {
	bin, err := ipBinary()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = pass
	if ns == nil {
		err = cmd.Start()
	} else {
		err = ns.do(cmd.Start)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("ip -batch: %w: %s\ncommands:\n%s", err, bytes.TrimSpace(out.Bytes()), strings.Join(cmds, "\n"))
	}
	return nil
}

// peerNetProbe says once per process whether Netns can work here,
// by doing in small what a peer network does: two namespaces, a veth pair
// between them, a blackhole policy rule (which needs a kernel with policy
// routing).
var peerNetProbe = sync.OnceValue(func() error {
	if err := probePeerNet(); err != nil {
		return fmt.Errorf("compose: PeerNetwork unavailable: %w", err)
	}
	return nil
})

func probePeerNet() error {
	if _, err := ipBinary(); err != nil {
		return err
	}
	a, err := newNetns()
	if err != nil {
		return err
	}
	defer a.close()
	b, err := newNetns()
	if err != nil {
		return err
	}
	defer b.close()
	return ip(a, []string{
		"link set lo up",
		"link add probe type veth peer name probe netns /proc/self/fd/3",
		fmt.Sprintf("rule add from 198.18.0.1 to 198.18.0.2 blackhole pref %d", partitionPref),
	}, b.f)
}

// PeerNetworkAvailable returns nil when this process can start servers
// with Netns (Spec.Netns), and otherwise why not:
// it needs Linux network namespaces, the privilege to create them (root,
// or CAP_SYS_ADMIN and CAP_NET_ADMIN) and the ip command (iproute2). It
// tries once per process, by creating and configuring a namespace. Tests
// that need partitions between members skip with this error.
func PeerNetworkAvailable() error { return peerNetProbe() }

// executable answers nil when p is a regular file someone may execute.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
