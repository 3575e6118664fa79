package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// TestBrokenLink breaks, for real, the control node's link to a host in
// the middle of a run over an inventory: host1, which runs the Redis
// server and the judge, drops every packet it sends to the control node
// (a blackhole route there) while the workers run on host2 and host3. The
// run must notice within its --link-timeout (keepalives unanswered, not a
// sleep), stop, tear down what it still reaches, and end with an error
// naming host1 and what may still run there — the server's and the
// judge's pidfiles; host1 indeed still runs them. Once the link is healed,
// the next run over the same inventory kills them by their pidfiles as it
// starts, runs its case, and leaves nothing on any host.
func TestBrokenLink(t *testing.T) {
	composetest.StartsServersWithin(t, 3*time.Minute)
	lab := remotetest.New(t, 3)
	binary := staticLockbench(t)
	inv := judgeInventory(t, lab)
	ctx := composetest.Context(t)

	run := start(t, "run", "--inventory", inv, "--binary", binary, "--backend", "redis", "--fault", "none",
		"--clients", "2", "--duration", "60s", "--link-timeout", "6s", "--out", t.TempDir(), "--no-report")
	lines := startLines(t, run)
	var seen []string
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for l := range lines {
			seen = append(seen, l)
		}
	}()
	if err := awaitWorker(ctx, lab.Dial(t, 1, "root"), ended); err != nil { // a worker on host2: the case is under way
		select {
		case <-ended:
			t.Fatalf("%v: %v\n%s", err, run.Wait(), strings.Join(seen, "\n"))
		default:
			t.Fatal(err)
		}
	}

	// host1 goes silent toward the control node (and only toward it: the
	// workers still reach its server and its judge).
	host1 := remote.Local{Host: lab.Hosts[0].Name, Netns: lab.Hosts[0].Netns}
	route := []string{"route", "add", "blackhole", lab.Control.String() + "/32"}
	if err := host1.Run(ctx, remote.Cmd{Path: "ip", Args: route}); err != nil {
		t.Fatal(err)
	}
	healed := false
	heal := func() {
		if !healed {
			healed = true
			route[1] = "del"
			if err := host1.Run(context.Background(), remote.Cmd{Path: "ip", Args: route}); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(heal)
	broke := time.Now()

	<-ended
	err := run.Wait()
	out := strings.Join(seen, "\n")
	t.Logf("the run ended %v after the break:\n%s", time.Since(broke).Round(time.Millisecond), out)
	if err == nil {
		t.Fatal("the run succeeded with a host lost")
	}
	for _, want := range []string{
		"the link to host " + lab.Hosts[0].Name + " broke",
		"may still run",
		"servers redis-0 (pidfile ",
		"the judge (pidfile /tmp/lockbench-work/workers/",
		"the next run against this inventory kills them by their pidfiles",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the run does not say %q", want)
		}
	}
	heal()

	// What the lost run left is there: the server and the judge.
	r := lab.Dial(t, 0, "root")
	left, err := remotetest.Processes(ctx, r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("left on %s: %v", lab.Hosts[0].Name, left)
	for _, want := range []string{"redis-server", "lockbench"} {
		if !slices.ContainsFunc(left, func(c string) bool { return strings.HasPrefix(c, want) }) {
			t.Errorf("%s runs no %s after the lost run: %v", lab.Hosts[0].Name, want, left)
		}
	}

	// The next run clears them, runs, and leaves nothing.
	next := start(t, "run", "--inventory", inv, "--binary", binary, "--backend", "redis", "--fault", "none",
		"--clients", "2", "--duration", "2s", "--out", t.TempDir(), "--no-report")
	nout, err := next.CombinedOutput()
	if err != nil {
		t.Fatalf("the run after the heal: %v\n%s", err, nout)
	}
	if !strings.Contains(string(nout), "killing a worker an earlier run left") {
		t.Errorf("the next run does not say it killed the judge the lost run left:\n%s", nout)
	}
	nothingLeft(t, ctx, lab, "after the next run")
}
