package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
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

// TestJoinedSaysWhatItCannotRecord records two cases of a judge of its
// own: one its runner described, which lands in results.json as every
// host's, and one it did not, which is said at once, reaches the host's
// result, and fails the save at the end.
func TestJoinedSaysWhatItCannotRecord(t *testing.T) {
	dir := t.TempDir()
	rec := &joined{path: filepath.Join(dir, "results.json")}
	var said bytes.Buffer
	j, err := judge.New(judge.Options{Out: dir, Finished: rec.finished(&said)})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	described := results.Case{Backend: "noop", Fault: "none", Host: "a", Clients: 1, Workload: "hot"}
	for _, tc := range []struct {
		id     string
		record *results.Case
	}{{"001", &described}, {"002", nil}} {
		spec := judge.CaseSpec{ID: tc.id, Name: "noop " + tc.id, Guards: []judge.Guard{judge.GuardNone, judge.GuardFence},
			Processes: 1, Duration: time.Minute, TimelineStep: time.Second, Record: tc.record}
		info, err := j.Open(ctx, "a", spec)
		if err != nil {
			t.Fatal(err)
		}
		c, err := judge.Dial(ctx, j.Addr(), tc.id, "a", info.FirstProcess, 0)
		if err != nil {
			t.Fatal(err)
		}
		key := info.KeyPrefix + "hot"
		now := time.Now().UnixNano()
		if _, err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		g, err := c.Grant(ctx, judge.GrantReport{Key: key, Invoke: now, Complete: now})
		if err == nil {
			err = errors.Join(c.Read(ctx, g.Section), c.Write(ctx, g.Section), c.End(ctx, g.Section), c.Done(ctx, judge.Metrics{Acquired: 1}))
		}
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		r, err := j.Finish(ctx, "a", tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if unrecorded := len(r.Unrecorded) > 0; unrecorded != (tc.record == nil) {
			t.Errorf("case %s: unrecorded %q", tc.id, r.Unrecorded)
		}
	}
	f, err := results.Read(rec.path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != 2 || f.Cases[0].Guard != "none" || f.Cases[1].Guard != "fence" || f.Cases[0].Host != "" || f.Cases[0].Clients != 1 || f.Cases[0].Acquired != 1 {
		t.Fatalf("results.json has %+v: want case 001 under both guards, as every host's", f.Cases)
	}
	if !strings.Contains(said.String(), "not recorded: case 002") {
		t.Errorf("the judge said %q: want case 002 named as not recorded", said.String())
	}
	if err := rec.save(); err == nil || !strings.Contains(err.Error(), "1 judged case(s) missing") {
		t.Errorf("save: %v, want the missing case said", err)
	}
}
