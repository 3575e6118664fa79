package composetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
)

// TestShared starts a shared Redis node once for any number of Gets, stops
// it on Close, removes its directory, and refuses to start again after.
func TestShared(t *testing.T) {
	starts := 0
	var node *compose.Node
	shared := composetest.NewShared(func(ctx context.Context, e *compose.Env) (string, error) {
		starts++
		nodes, err := redis.StartServers(ctx, e, compose.Spec{Nodes: 1}, redis.Options{})
		if err != nil {
			return "", err
		}
		node = nodes[0]
		return e.Dir, nil
	})
	dir := shared.Get(t)
	if again := shared.Get(t); again != dir || starts != 1 {
		t.Fatalf("second Get: %q after %d starts, want %q after 1", again, starts, dir)
	}
	pid := node.PID()
	started := startTime(t, pid)
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waits for the process to exit: the pid is gone, a zombie the
	// machine's init has yet to reap, or (on a busy machine) taken by a
	// process that started later.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		if now := startTime(t, pid); now == started {
			t.Fatalf("shared node's process %d after Close: kill 0 = %v, want ESRCH", pid, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("shared run dir after Close: %v, want it removed", err)
	}

	// A Get after Close fails rather than starting servers nobody stops.
	ft := &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		shared.Get(ft)
	}()
	if !ft.failed || starts != 1 {
		t.Fatalf("Get after Close: failed %v after %d starts, want a failure and no start", ft.failed, starts)
	}
}

// fakeTB records a Fatal instead of ending the test.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatal(args ...any) {
	f.failed = true
	panic("fatal")
}

// startTime is when process pid started (field 22 of /proc/pid/stat, in
// clock ticks since boot): a pid and its start time name one process even
// when the pid is reused. "" when the process is gone, or a zombie that
// its parent (this machine's init, for a server compose started as a
// daemon) has not reaped yet.
func startTime(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 20 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	if strings.ContainsAny(fields[0], "ZXx") {
		return ""
	}
	return fields[19]
}
