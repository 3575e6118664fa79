package remotetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockbench/lockbench/internal/servertest"
	"github.com/lockbench/lockbench/remote"
)

// TestMain lets the test binary play a process that starts a lab and
// servers on it and is then killed (TestKilledLeavesNothing).
func TestMain(m *testing.M) {
	if os.Getenv("LOCKBENCH_LAB_PARENT") != "" {
		labParent()
		return
	}
	os.Exit(m.Run())
}

// marks are what a lab leaves on this machine while it runs.
type marks struct {
	Inits  []int    // each host's sshd
	PidNS  []uint64 // each host's PID namespace (inode)
	NetNS  []uint64 // each host's network namespace and the bridge's
	Link   string   // the control node's link
	Dir    string
	Local  int      // a daemon remote.Local started here
	Guests []string // daemons started over SSH, as host:pidfile
}

func inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// marksOf records l's marks, after starting a daemon over SSH on each
// host and one here.
func marksOf(ctx context.Context, l *Lab, dir string) (marks, error) {
	m := marks{Link: l.link, Dir: l.Dir}
	for i, h := range l.Hosts {
		m.Inits = append(m.Inits, h.Pid())
		pidns, err := inode(fmt.Sprintf("/proc/%d/ns/pid", h.Pid()))
		if err != nil {
			return m, err
		}
		netns, err := inode(fmt.Sprintf("/proc/%d/ns/net", h.Pid()))
		if err != nil {
			return m, err
		}
		m.PidNS, m.NetNS = append(m.PidNS, pidns), append(m.NetNS, netns)
		s, err := remote.DialSSH(ctx, l.SSHConfig(i, "root"))
		if err != nil {
			return m, err
		}
		p, err := remote.Start(ctx, s, remote.Daemon{Path: "sleep", Args: []string{"3600"}, Pidfile: "/tmp/marks/sleep.pid"})
		s.Close()
		if err != nil {
			return m, err
		}
		m.Guests = append(m.Guests, h.Name+":"+p.Pidfile)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(l.sw.Fd()), &st); err != nil {
		return m, err
	}
	m.NetNS = append(m.NetNS, st.Ino)
	p, err := remote.Start(ctx, remote.Local{}, remote.Daemon{Path: "sleep", Args: []string{"3600"}, Pidfile: filepath.Join(dir, "local.pid")})
	if err != nil {
		return m, err
	}
	m.Local, err = p.Pid(ctx)
	return m, err
}

// left lists what is left of m on this machine.
func (m marks) left() ([]string, error) {
	var left []string
	gone := func(pid int) bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
	}
	for _, pid := range append(append([]int{}, m.Inits...), m.Local) {
		if !gone(pid) {
			left = append(left, fmt.Sprintf("process %d", pid))
		}
	}
	want := map[string]bool{}
	for _, ino := range m.PidNS {
		want[fmt.Sprintf("pid:[%d]", ino)] = true
	}
	for _, ino := range m.NetNS {
		want[fmt.Sprintf("net:[%d]", ino)] = true
	}
	for _, pattern := range []string{"/proc/[0-9]*/ns/pid", "/proc/[0-9]*/task/[0-9]*/ns/net", "/proc/[0-9]*/fd/*"} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if l, err := os.Readlink(p); err == nil && want[l] {
				left = append(left, p+" → "+l)
			}
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(mounts)) {
		for ns := range want {
			if strings.Contains(line, ns) {
				left = append(left, "mount "+strings.TrimSpace(line))
			}
		}
	}
	if _, err := net.InterfaceByName(m.Link); err == nil {
		left = append(left, "link "+m.Link)
	}
	return left, nil
}

// waitGone waits until nothing of m but its dir is left: the kernel
// tears namespaces down after the processes in them have died.
func (m marks) waitGone(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := m.left()
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after %v:\n%s", d, strings.Join(left, "\n"))
		}
		<-tick.C
	}
}

// TestCloseLeavesNothing: after Close no process, namespace, link or dir
// of the lab is left, servers started on its hosts over SSH included.
func TestCloseLeavesNothing(t *testing.T) {
	servertest.StartsServers(t)
	if err := Available(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := Start(2)
	if err != nil {
		t.Fatal(err)
	}
	m, err := marksOf(ctx, l, t.TempDir())
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	// The local daemon is not the lab's: it dies with this process.
	_ = syscall.Kill(m.Local, syscall.SIGKILL)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	m.waitGone(t, 30*time.Second)
	if _, err := os.Stat(m.Dir); err == nil {
		t.Errorf("%s left behind", m.Dir)
	}
	if l.Close() != nil {
		t.Error("a second Close failed")
	}
}

// labParent starts a lab of two hosts with a server on each, and a daemon
// here, prints their marks and waits to be killed.
func labParent() {
	ctx := context.Background()
	l, err := Start(2)
	if err == nil {
		var m marks
		if m, err = marksOf(ctx, l, os.Getenv("LOCKBENCH_LAB_PARENT")); err == nil {
			b, _ := json.Marshal(m)
			fmt.Printf("%s\nready\n", b)
			select {}
		}
	}
	fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
	os.Exit(1)
}

// TestKilledLeavesNothing: when the process that made a lab is killed
// (SIGKILL: no cleanup code runs), its hosts die with every process on
// them, its namespaces and link go, a daemon remote.Local started dies
// too, and the next lab removes its dir.
func TestKilledLeavesNothing(t *testing.T) {
	servertest.StartsServers(t)
	if err := Available(); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCKBENCH_LAB_PARENT="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	var m marks
	for sc.Scan() && sc.Text() != "ready" {
		if strings.HasPrefix(sc.Text(), "error") {
			t.Fatal(sc.Text())
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("marks %q: %v", sc.Text(), err)
		}
	}
	if len(m.Inits) != 2 || m.Local == 0 {
		t.Fatalf("marks %+v", m)
	}
	if left, err := m.left(); err != nil || len(left) == 0 {
		t.Fatalf("marks of a live lab not found (%v): %+v", err, m)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	m.waitGone(t, time.Minute)
	leftover := filepath.Join(m.Dir, "id_ed25519")
	b, err := os.ReadFile(leftover)
	if errors.Is(err, fs.ErrNotExist) {
		// A lab of another test binary (go test runs packages in
		// parallel) started since, and removed it: what this test wants
		// of the next lab.
		t.Logf("the killed lab's key %s was removed by a lab started meanwhile", leftover)
		return
	}
	if err != nil {
		t.Fatalf("the killed lab's key %s: %v (the next lab is to remove it)", leftover, err)
	}
	New(t, 1)
	// The next lab may take the same slot, and so the same dir, but not
	// the old files.
	if now, err := os.ReadFile(leftover); err == nil && string(now) == string(b) {
		t.Errorf("the next lab left the killed lab's %s", leftover)
	}
}
