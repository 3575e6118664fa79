package composetest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	rediskind "github.com/lockbench/lockbench/kinds/redis"
)

// grace is servertest's: how long a test whose servers were killed at its
// deadline has to end before the test binary panics.
const grace = 10 * time.Second

// helperEnv names the variable that makes a Test* function below play the
// test under test, in a child process of this test binary.
const helperEnv = "COMPOSETEST_HELPER"

// child runs the helper test name in a child process of this test binary
// with extra arguments and a deadline scale, and returns its combined
// output, its error and how long it ran.
func child(t *testing.T, name, scale string, args ...string) (string, error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^" + name + "$", "-test.v"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name, ScaleEnv+"="+scale)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	return string(out), err, time.Since(start)
}

func helper(t *testing.T) {
	if os.Getenv(helperEnv) != t.Name() {
		t.Skip("plays the test under test in a child process of another test")
	}
}

// TestHelperStartsServers starts a server and records it.
func TestHelperStartsServers(t *testing.T) {
	helper(t)
	e := ForTest(t)
	if _, err := rediskind.StartServers(context.Background(), e, compose.Spec{Nodes: 1}, rediskind.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Log("started a server")
}

// TestSkippedUnderShort: under -short a test that starts servers is
// skipped before it starts any.
func TestSkippedUnderShort(t *testing.T) {
	out, err, _ := child(t, "TestHelperStartsServers", "1", "-test.short")
	if err != nil || !strings.Contains(out, "--- SKIP: TestHelperStartsServers") || strings.Contains(out, "started a server") {
		t.Fatalf("child under -short: %v\n%s", err, out)
	}
}

// TestHelperBlocksOnItsServer waits on its server for ever (BLPOP with no
// timeout): the deadline must kill the server, which ends the wait.
func TestHelperBlocksOnItsServer(t *testing.T) {
	helper(t)
	e := ForTest(t)
	nodes, err := rediskind.StartServers(context.Background(), e, compose.Spec{Nodes: 1}, rediskind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: nodes[0].Addr(), ReadTimeout: -1, MaxRetries: -1})
	defer c.Close()
	t.Log("waiting on the server")
	err = c.BLPop(context.Background(), 0, "never").Err()
	t.Logf("the wait ended: %v", err)
}

// TestDeadlineKillsServers: a test that waits on its server past its
// deadline fails with every goroutine's stack on stderr (its own wait
// among them), and its servers are killed, which ends it: the binary
// goes on instead of hanging.
func TestDeadlineKillsServers(t *testing.T) {
	StartsServers(t)
	// DefaultDeadline × 0.1: six seconds, ample for a Redis start.
	out, err, took := child(t, "TestHelperBlocksOnItsServer", "0.1")
	for _, want := range []string{
		"waiting on the server",
		"is still running 6s after it started servers, its deadline",
		"composetest.TestHelperBlocksOnItsServer(", // the test's own goroutine, in the dump
		"ran past its deadline of 6s",
		"the wait ended",
		"--- FAIL: TestHelperBlocksOnItsServer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("child's output lacks %q", want)
		}
	}
	if err == nil || strings.Contains(out, "panic:") || took > 6*time.Second+grace {
		t.Errorf("child: %v after %v, want a failure (no panic) within its deadline and the grace", err, took)
	}
	if t.Failed() {
		t.Logf("child's output:\n%s", out)
	}
}
