package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/judge"
)

// startJudge runs lockbench judge with args in the background, killed
// when the test ends, and returns it with the address it listens on.
func startJudge(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := start(t, append([]string{"judge", "--listen", "127.0.0.1:0"}, args...)...)
	// A binary built with -race sleeps a second at exit (the race
	// detector's atexit_sleep_ms), which is not the judge's to count.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("the judge printed nothing")
	}
	line := sc.Text()
	go io.Copy(io.Discard, out) // whatever it prints next
	_, rest, _ := strings.Cut(line, "listening on ")
	addr, _, _ := strings.Cut(rest, " ")
	if addr == "" {
		t.Fatalf("no address in %q", line)
	}
	return cmd, addr
}

// TestJudgeStopsOnInterrupt interrupts a lockbench judge of two hosts
// while one host has opened a case and waits for the other, and a client
// of that host waits at the start barrier: the judge exits within a
// second, and both hear that it is gone.
func TestJudgeStopsOnInterrupt(t *testing.T) {
	cmd, addr := startJudge(t, "--hosts", "2", "--out", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	host, err := judge.DialRemote(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	spec := judge.CaseSpec{ID: "001", Guards: []judge.Guard{judge.GuardNone}, Processes: 1, Duration: time.Minute, TimelineStep: time.Second}
	opened := make(chan error, 1)
	go func() { _, err := host.Open(ctx, "a", spec); opened <- err }()
	// The client's hello is refused until the judge has the host's Open,
	// which then waits for the second host.
	var client judge.Conn
	for client == nil {
		c, err := judge.Dial(ctx, addr, "001", "a", 0, 0)
		switch {
		case err == nil:
			client = c
		case ctx.Err() != nil:
			t.Fatalf("the judge never had the host's case open: %v", err)
		case !errors.Is(err, judge.ErrProtocol):
			t.Fatal(err)
		}
	}
	defer client.Close()
	ready := make(chan error, 1)
	go func() { _, err := client.Ready(ctx); ready <- err }()

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	interrupted := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		took := time.Since(interrupted)
		t.Logf("the judge exited %v after SIGINT: %v", took, err)
		if err != nil {
			t.Errorf("judge: %v", err)
		}
		if took > time.Second {
			t.Errorf("the judge took %v to exit after SIGINT: want at most 1s", took)
		}
	case <-ctx.Done():
		t.Fatal("the judge had not exited a minute after SIGINT")
	}
	for what, ch := range map[string]chan error{"the host's Open": opened, "the client's Ready": ready} {
		if err := <-ch; err == nil {
			t.Errorf("%s returned no error when the judge went away", what)
		} else {
			t.Logf("%s: %v", what, err)
		}
	}
}
