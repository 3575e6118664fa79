package compose_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
)

// mounted reports whether a lazy filesystem is mounted at dir.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir && strings.Contains(line, "lockbench-lazyfs") {
			return true
		}
	}
	return false
}

// TestLazyFSAfterParentKilled kills a process serving two Redis nodes on
// lazy filesystems: the servers die with it, their mounts are left dead
// (nobody serves them), and the next lazy filesystem compose mounts
// unmounts them. Its servers do not hold the FUSE device, which would
// keep a dead mount's connection open.
func TestLazyFSAfterParentKilled(t *testing.T) {
	composetest.StartsServers(t)
	composetest.NeedsLazyFS(t)
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), "COMPOSE_ORPHAN_PARENT="+t.TempDir(), "COMPOSE_ORPHAN_KIND=lazyfs")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		pids   []int
		mounts []string
	)
	for sc := bufio.NewScanner(out); sc.Scan(); {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "ready" {
			break
		}
		switch f[0] {
		case "error":
			t.Fatalf("parent: %s", sc.Text())
		case "mount":
			mounts = append(mounts, f[1])
		case "pid", "live":
			pid, _ := strconv.Atoi(f[1])
			pids = append(pids, pid)
		}
	}
	if len(pids) != 2 || len(mounts) != 2 {
		t.Fatalf("parent reported pids %v and mounts %v; want two of each", pids, mounts)
	}
	for _, pid := range pids {
		fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			if target, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); target == "/dev/fuse" {
				t.Errorf("server %d holds /dev/fuse as fd %s", pid, fd.Name())
			}
		}
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for _, pid := range pids {
		if !waitExit(t, pid, 10*time.Second) {
			t.Fatalf("server %d survived its killed parent", pid)
		}
	}
	// The kernel drops a FUSE connection when the last holder of its
	// device is gone, which may come a little after the process's exit.
	for _, m := range mounts {
		deadline := time.Now().Add(10 * time.Second)
		var st syscall.Statfs_t
		for err := syscall.Statfs(m, &st); err != syscall.ENOTCONN; err = syscall.Statfs(m, &st) {
			if time.Now().After(deadline) {
				t.Fatalf("statfs of %s 10s after its server died: %v; want ENOTCONN (a dead mount)", m, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The next lazy filesystem sweeps the dead mounts.
	if _, err := redis.StartServers(context.Background(), composetest.ForTest(t), compose.Spec{Nodes: 1, LazyFS: true}, redis.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if mounted(t, m) {
			t.Errorf("%s is still mounted after the sweep", m)
		}
	}
}
