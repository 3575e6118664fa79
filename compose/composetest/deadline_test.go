package composetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
)

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
	if _, err := e.Redis(context.Background(), 1, compose.RedisOptions{}); err != nil {
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
	nodes, err := e.Redis(context.Background(), 1, compose.RedisOptions{})
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

// TestHelperIgnoresItsServers hangs whatever happens to its servers.
func TestHelperIgnoresItsServers(t *testing.T) {
	helper(t)
	grace = 100 * time.Millisecond // before the deadline's timer starts
	StartsServers(t)
	t.Log("hanging")
	select {}
}

// TestDeadlineEndsAHungBinary: a test that still hangs once its servers
// are killed ends the test binary with a panic that names it, one grace
// after its deadline, rather than at go test's 10-minute timeout.
func TestDeadlineEndsAHungBinary(t *testing.T) {
	// DefaultDeadline × 0.005: 300 ms.
	out, err, took := child(t, "TestHelperIgnoresItsServers", "0.005")
	if err == nil || !strings.Contains(out, "hanging") || !strings.Contains(out, "panic: composetest: TestHelperIgnoresItsServers still running") ||
		!bytes.Contains([]byte(out), []byte("composetest.TestHelperIgnoresItsServers(")) || took > time.Minute {
		t.Fatalf("child: %v after %v, want a panic naming the test, with its stack, well before a minute:\n%s", err, took, out)
	}
}

// TestSubtestsShareTheirParentsDeadline: a subtest of a test that has a
// deadline runs under it, and a longer budget asked for by the subtest
// moves it; a test without one gets its own.
func TestSubtestsShareTheirParentsDeadline(t *testing.T) {
	arm(t, time.Hour)
	parent := func() *watch {
		watchesMu.Lock()
		defer watchesMu.Unlock()
		return watches[t.Name()]
	}()
	t.Run("sub", func(t *testing.T) {
		arm(t, 2*time.Hour)
		watchesMu.Lock()
		_, own := watches[t.Name()]
		w := watchOf(t.Name())
		watchesMu.Unlock()
		if own || w != parent {
			t.Fatalf("the subtest has a deadline of its own (%v), or another test's", own)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.deadline < 2*time.Hour {
			t.Fatalf("parent's deadline %v after the subtest asked for 2h from now", w.deadline)
		}
	})
	arm(t, time.Minute) // never earlier
	parent.mu.Lock()
	if parent.deadline < 2*time.Hour {
		t.Errorf("a shorter budget moved the deadline to %v", parent.deadline)
	}
	parent.mu.Unlock()
}

// TestContextEndsBeforeTheDeadline checks that Context ends a tenth of
// the test's deadline before it, and moves with ScaleEnv as the deadline
// does.
func TestContextEndsBeforeTheDeadline(t *testing.T) {
	t.Setenv(ScaleEnv, "2")
	StartsServersWithin(t, 10*time.Second)
	start := time.Now()
	d, ok := Context(t).Deadline()
	if !ok {
		t.Fatal("the context has no deadline")
	}
	if got, want := d.Sub(start), 18*time.Second; got > want || got < want-time.Second {
		t.Errorf("the context ends %v after the test's deadline was armed, want about %v (0.9 × 2 × 10 s)", got, want)
	}
}
