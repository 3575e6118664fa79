package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/results"
)

// start runs this test binary as lockbench with args in the background,
// killed when the test ends.
func start(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "LOCKBENCH_TEST_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// TestTwoHostsShareAJudge runs two lockbench runs, as two hosts, against
// one judge and one Redis: they start each case together and contend for
// the same keys, so the grants of the Redis lock alternate between them
// without an overlap, and the noop control's overlaps between them are
// counted.
func TestTwoHostsShareAJudge(t *testing.T) {
	composetest.StartsServersWithin(t, 3*time.Minute) // 40 s on a 2-core machine loaded about 10×
	ctx := composetest.Context(t)
	nodes, err := redis.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 1}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jdir := t.TempDir()
	judgeCmd, addr := startJudge(t, "--hosts", "2", "--out", jdir)

	var wg sync.WaitGroup
	for _, host := range []string{"a", "b"} {
		wg.Go(func() {
			cmd := start(t, "run", "--judge", addr, "--host", host, "--backend", "redis,noop", "--redis-addrs", nodes[0].Addr(),
				"--clients", "2", "--clients-as", "processes", "--duration", "2s", "--out", filepath.Join(jdir, "host-"+host), "--no-report")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("host %s: %v\n%s", host, err, b)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if err := judgeCmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := judgeCmd.Wait(); err != nil {
		t.Fatalf("judge: %v", err)
	}
	f, err := results.Read(filepath.Join(jdir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != 2 || len(f.Hosts) != 2 {
		t.Fatalf("the judge recorded %d cases from hosts %v: want 2 from a and b", len(f.Cases), f.Hosts)
	}
	for _, c := range f.Cases {
		ops, err := history.ReadFile(filepath.Join(jdir, c.History))
		if err != nil {
			t.Fatal(err)
		}
		switches, across := crossHost(ops)
		t.Logf("%s: %d grants by %d clients, %d overlaps (%d between hosts), grants changed host %d times, linearizable %s",
			c.Backend, c.Acquired, c.Clients, c.Overlaps, across, switches, c.Linearizable)
		if c.Clients != 4 {
			t.Errorf("%s: %d clients, want the 4 of both hosts", c.Backend, c.Clients)
		}
		switch c.Backend {
		case "redis":
			if c.Overlaps != 0 || c.Linearizable != results.Linearizable || switches < 10 {
				t.Errorf("redis across two hosts: %d overlaps, linearizable %s, the key changed host %d times: want 0, true, contention",
					c.Overlaps, c.Linearizable, switches)
			}
		case "noop":
			if c.Overlaps == 0 || across == 0 || c.Linearizable != results.NotLinearizable {
				t.Errorf("noop across two hosts: %d overlaps, %d between hosts, linearizable %s", c.Overlaps, across, c.Linearizable)
			}
		}
	}
	// Each host's own file carries the joint safety counts.
	for _, host := range []string{"a", "b"} {
		hf, err := results.Read(filepath.Join(jdir, "host-"+host, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range hf.Cases {
			if c.Overlaps != f.Cases[i].Overlaps || c.Host != host {
				t.Errorf("host %s, %s: %d overlaps, host %q; the judge counted %d", host, c.Backend, c.Overlaps, c.Host, f.Cases[i].Overlaps)
			}
		}
	}
}

// crossHost counts, in a history, how often consecutive grants of a key
// came from different hosts, and the grants made while a section of
// another host was active.
func crossHost(ops []history.Op) (switches, across int) {
	last := ""
	active := map[int64]string{}
	for _, o := range ops {
		switch {
		case o.F == history.Acquire && o.Type == history.OK:
			if last != "" && o.Host != last {
				switches++
			}
			last = o.Host
			for _, h := range active {
				if h != o.Host {
					across++
					break
				}
			}
			active[o.Section] = o.Host
		case o.F == history.End:
			delete(active, o.Section)
		}
	}
	return switches, across
}

// TestWorkersDieWithTheRunner kills a run (SIGKILL, no chance to clean
// up) while its worker processes run: none may survive it.
func TestWorkersDieWithTheRunner(t *testing.T) {
	runner := start(t, "run", "--backend", "noop", "--clients", "3", "--clients-as", "processes", "--duration", "60s",
		"--out", t.TempDir(), "--no-report")
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = runner.Wait(); close(done) }()
	deadline := time.Now().Add(time.Minute)
	for len(workersOf(t, runner.Process.Pid)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the run started %d workers in a minute", len(workersOf(t, runner.Process.Pid)))
		}
		select {
		case <-done:
			t.Fatal("the run ended before its workers started")
		case <-time.After(10 * time.Millisecond):
		}
	}
	workers := workersOf(t, runner.Process.Pid)
	if err := runner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	// Polling the kernel's process table: there is no event to wait on.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		alive := 0
		for _, pid := range workers {
			if syscall.Kill(pid, 0) == nil && !zombie(pid) {
				alive++
			}
		}
		if alive == 0 {
			return
		}
		<-tick.C
	}
	t.Fatalf("worker processes %v outlived their killed runner", workers)
}

// workersOf returns the pids of the lockbench worker processes whose
// parent is pid.
func workersOf(t *testing.T, pid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		fields := strings.Fields(string(b)[i+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if strings.Contains(string(cmdline), "worker") {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, child)
		}
	}
	return out
}

// zombie reports whether pid has exited and waits for its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}
