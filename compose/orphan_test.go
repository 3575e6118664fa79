package compose_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/kinds/redis"
)

// TestMain lets the test binary play a parent that starts servers and is
// then killed, for TestNoOrphansAfterParentKilled and
// TestPeerNetworkCleanup, or an unprivileged user, for
// TestPeerNetworkUnprivileged; or, run as "lazyfs ...", the lockbench
// binary's lazyfs command on a simulated host, for TestPlacedPowerLoss;
// or, run as "proxy ...", its proxy command, for TestPlacedProxy.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "proxy" {
		proxyMain(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "lazyfs" {
		if err := compose.LazyFSMain(context.Background(), os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if dir := os.Getenv("COMPOSE_ORPHAN_PARENT"); dir != "" {
		orphanParent(dir, os.Getenv("COMPOSE_ORPHAN_KIND"))
		return
	}
	if dir := os.Getenv("COMPOSE_PEERNET_PARENT"); dir != "" {
		peerNetParent(dir)
		return
	}
	if dir := os.Getenv("COMPOSE_PEERNET_UNPRIVILEGED"); dir != "" {
		peerNetUnprivileged(dir)
		return
	}
	os.Exit(m.Run())
}

// orphanParent starts two Redis nodes (kind ""), two on lazy filesystems
// (kind "lazyfs", printing their mount points) or a PostgreSQL server
// with a session open (kind "postgres"), prints the pids of the server
// processes that must be running ("live": the Redis servers, the
// postmaster and the session's backend) and of every other child of the
// postmaster at that moment ("pid": some, such as an autovacuum worker or
// the backend of a probe on its way out, end by themselves), and waits to
// be killed.
func orphanParent(dir, kind string) {
	env, err := compose.New(dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx := context.Background()
	var live, pids []int
	switch kind {
	case "postgres":
		n, err := postgres.StartServer(ctx, env, compose.Spec{}, postgres.Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		// A session, so that a backend process is among the children.
		conn, err := pgx.Connect(ctx, postgres.URL(n.Addr()))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		var backend int
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		live = []int{n.PID(), backend}
		for _, pid := range composetest.Children(n.PID()) {
			if pid != backend {
				pids = append(pids, pid)
			}
		}
		// Its dir may lie outside the run dir: the test removes it.
		fmt.Println("dir", n.Dir)
	default:
		// Kind "lazyfs": on lazy filesystems, under the clock preload.
		lazy := kind == "lazyfs"
		nodes, err := redis.StartServers(ctx, env, compose.Spec{Nodes: 2, LazyFS: lazy, FakeClock: lazy}, redis.Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for _, n := range nodes {
			live = append(live, n.PID())
			if lazy {
				fmt.Println("mount", n.Dir)
			}
		}
	}
	for _, pid := range live {
		fmt.Println("live", pid)
	}
	for _, pid := range pids {
		fmt.Println("pid", pid)
	}
	fmt.Println("ready")
	select {}
}

// processAlive is composetest.ProcessAlive, by the name these tests use.
var processAlive = composetest.ProcessAlive

func TestNoOrphansAfterParentKilled(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 38 s on a 2-core machine loaded about 10×
	for _, kind := range []string{"redis", "postgres"} {
		t.Run(kind, func(t *testing.T) { noOrphans(t, kind) })
	}
}

// noOrphans starts servers of a kind in a child process, kills it and
// checks that every server process dies with it. PostgreSQL's children
// each start a session of their own: the kernel kills the postmaster with
// its parent, and they must follow it. Only the processes that must be
// running are checked before the kill; every process listed, after.
func noOrphans(t *testing.T, kind string) {
	composetest.StartsServers(t)
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), "COMPOSE_ORPHAN_PARENT="+t.TempDir(), "COMPOSE_ORPHAN_KIND="+kind)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var live, pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "ready" {
			break
		}
		if f[0] == "error" {
			t.Fatalf("parent: %s", sc.Text())
		}
		if f[0] == "dir" {
			t.Cleanup(func() { os.RemoveAll(f[1]) })
		}
		if f[0] == "pid" || f[0] == "live" {
			pid, _ := strconv.Atoi(f[1])
			pids = append(pids, pid)
			if f[0] == "live" {
				live = append(live, pid)
			}
		}
	}
	if len(live) < 2 {
		t.Fatalf("parent reported %d running server pids, want at least 2", len(live))
	}
	for _, pid := range live {
		if !processAlive(pid) {
			t.Fatalf("server %d not running while its parent lives", pid)
		}
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	// The kernel delivers the parent-death signal as the parent exits:
	// wait for each child's exit through a pidfd, which becomes readable
	// when the process terminates.
	for _, pid := range pids {
		if !waitExit(t, pid, 10*time.Second) {
			t.Fatalf("server %d survived its killed parent", pid)
		}
	}
}

// waitExit reports whether process pid exits within d.
func waitExit(t *testing.T, pid int, d time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true // already gone
	}
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(d.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd of %d: %v", pid, err)
		}
		return n == 1 || !processAlive(pid)
	}
}
