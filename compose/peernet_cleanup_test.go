package compose_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/etcd"
	"github.com/lockbench/lockbench/kinds/zookeeper"
)

// peerMarks is what a PeerNetwork member leaves on the machine while it
// runs: its process, its network namespace and the host's link to the
// cluster's network.
type peerMarks struct {
	pid   int
	netns uint64 // inode
	link  int    // index of the host link that holds the network's host address
	addr  string
}

// String is the form peerNetParent prints and parsePeerMarks reads.
func (m peerMarks) String() string {
	return fmt.Sprintf("marks %d %d %d %s", m.pid, m.netns, m.link, m.addr)
}

func parsePeerMarks(line string) (m peerMarks, err error) {
	_, err = fmt.Sscanf(line, "marks %d %d %d %s", &m.pid, &m.netns, &m.link, &m.addr)
	return m, err
}

// marksOf finds the marks of a running PeerNetwork member.
func marksOf(n *compose.Node) (peerMarks, error) {
	m := peerMarks{pid: n.PID(), addr: n.ServerAddr()}
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", m.pid))
	if err != nil {
		return m, err
	}
	if _, err := fmt.Sscanf(l, "net:[%d]", &m.netns); err != nil {
		return m, fmt.Errorf("namespace link %q: %w", l, err)
	}
	ap, err := netip.ParseAddrPort(m.addr)
	if err != nil {
		return m, err
	}
	host := ap.Addr().As4()
	host[3] = 254 // the host's address in a peer network
	ifs, err := net.Interfaces()
	if err != nil {
		return m, err
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == netip.AddrFrom4(host) {
				m.link = ifc.Index
				return m, nil
			}
		}
	}
	return m, fmt.Errorf("no host link holds %v", netip.AddrFrom4(host))
}

// checkGone checks that nothing of m is left: the process has exited, no
// host link has its index, nothing holds its namespace.
func (m peerMarks) checkGone(t *testing.T) {
	t.Helper()
	if !waitExit(t, m.pid, 10*time.Second) {
		t.Errorf("member %d still running", m.pid)
	}
	if l, err := net.InterfaceByIndex(m.link); err == nil {
		t.Errorf("host link %s (index %d) of %s left behind", l.Name, m.link, m.addr)
	}
	held, err := compose.NetnsHolders(m.netns)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) > 0 {
		t.Errorf("namespace of %s (inode %d) still held: %v", m.addr, m.netns, held)
	}
}

// peerNetParent starts a one-member PeerNetwork etcd cluster, prints its
// marks and waits to be killed (for TestPeerNetworkCleanup).
func peerNetParent(dir string) {
	env, err := compose.New(dir)
	if err == nil {
		var c *etcd.Cluster
		if c, err = etcd.StartCluster(context.Background(), env, compose.Spec{Nodes: 1, Netns: true}, etcd.Options{}); err == nil {
			var m peerMarks
			if m, err = marksOf(c.Nodes[0]); err == nil {
				fmt.Println(m)
				fmt.Println("ready")
				select {}
			}
		}
	}
	fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
	os.Exit(1)
}

// TestPeerNetworkCleanup checks that a Netns cluster leaves nothing
// behind — no process, host link or namespace — when its Env is closed,
// and when the process that started it is killed (SIGKILL: no cleanup
// code runs), once the next Netns cluster has started.
func TestPeerNetworkCleanup(t *testing.T) {
	composetest.NeedsPeerNetwork(t)
	// Not parallel: a namespace's inode may be reused by another one
	// created meanwhile, which would read as a leftover.
	t.Run("Close", func(t *testing.T) {
		env, err := compose.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		c, err := etcd.StartCluster(context.Background(), env, compose.Spec{Nodes: 1, Netns: true, Proxied: true}, etcd.Options{})
		if err != nil {
			env.Close()
			t.Fatal(err)
		}
		m, err := marksOf(c.Nodes[0])
		if err != nil {
			env.Close()
			t.Fatal(err)
		}
		if err := env.Close(); err != nil {
			t.Fatal(err)
		}
		m.checkGone(t)
	})

	t.Run("killed", func(t *testing.T) {
		parent := exec.Command(os.Args[0], "-test.run=^$")
		parent.Env = append(os.Environ(), "COMPOSE_PEERNET_PARENT="+t.TempDir())
		out, err := parent.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := parent.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
		var m peerMarks
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatalf("parent: %s", line)
			}
			if strings.HasPrefix(line, "marks") {
				if m, err = parsePeerMarks(line); err != nil {
					t.Fatalf("parent said %q: %v", line, err)
				}
			}
			if line == "ready" {
				break
			}
		}
		if m.pid == 0 {
			t.Fatal("parent ended without starting its cluster")
		}
		if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = parent.Wait()
		// The next cluster (any Env) removes what the dead one left.
		env := composetest.ForTest(t)
		if _, err := etcd.StartCluster(context.Background(), env, compose.Spec{Nodes: 1, Netns: true}, etcd.Options{}); err != nil {
			t.Fatal(err)
		}
		m.checkGone(t)
	})
}

// peerNetUnprivileged tries PeerNetwork in dir and prints what each
// entry point answered (for TestPeerNetworkUnprivileged).
func peerNetUnprivileged(dir string) {
	env, err := compose.New(dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	defer env.Close()
	ctx := context.Background()
	_, etcdErr := etcd.StartCluster(ctx, env, compose.Spec{Nodes: 3, Netns: true}, etcd.Options{})
	_, zkErr := zookeeper.StartEnsemble(ctx, env, compose.Spec{Nodes: 3, Netns: true}, zookeeper.Options{})
	for name, err := range map[string]error{"available": compose.PeerNetworkAvailable(), "etcd": etcdErr, "zookeeper": zkErr} {
		fmt.Printf("%s: %v\n", name, err)
	}
	fmt.Println("nodes:", len(env.Nodes()))
}

// TestPeerNetworkUnprivileged runs this test binary as nobody and checks
// that PeerNetwork fails at once there, saying it needs root, and starts
// nothing.
func TestPeerNetworkUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		err := compose.PeerNetworkAvailable()
		if err == nil || !strings.Contains(err.Error(), "root") {
			t.Fatalf("PeerNetworkAvailable as uid %d: %v; want an error saying it needs root", os.Geteuid(), err)
		}
		return
	}
	// nobody must reach the binary and write its run dir.
	dir, err := os.MkdirTemp("", "lockbench-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "compose.test")
	if err := copyExecutable(os.Args[0], exe); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "COMPOSE_PEERNET_UNPRIVILEGED="+run)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
	for _, want := range []string{"available: ", "etcd: ", "zookeeper: "} {
		var line string
		for l := range strings.Lines(string(out)) {
			if strings.HasPrefix(l, want) {
				line = l
			}
		}
		if !strings.Contains(line, "PeerNetwork unavailable") || !strings.Contains(line, "needs root") {
			t.Errorf("%q: want an error saying PeerNetwork is unavailable and needs root", strings.TrimSpace(line))
		}
	}
	if !strings.Contains(string(out), "nodes: 0") {
		t.Error("nodes were started without PeerNetwork")
	}
}

// copyExecutable makes the file at from an executable at to: a hard link,
// or where from is on another filesystem a copy made by cp. Neither leaves
// this process a descriptor open for writing to, which a parallel test's
// fork could inherit until its exec, making the exec of to fail with
// "text file busy" (golang.org/issue/22315).
func copyExecutable(from, to string) error {
	if err := os.Link(from, to); err == nil {
		return nil
	}
	if out, err := exec.Command("cp", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("cp %s %s: %w: %s", from, to, err, out)
	}
	return nil
}
