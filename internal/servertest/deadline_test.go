package servertest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// helperEnv names the variable that makes a Test* function below play the
// test under test, in a child process of this test binary.
const helperEnv = "SERVERTEST_HELPER"

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
	if err == nil || !strings.Contains(out, "hanging") || !strings.Contains(out, "panic: servertest: TestHelperIgnoresItsServers still running") ||
		!bytes.Contains([]byte(out), []byte("servertest.TestHelperIgnoresItsServers(")) || took > time.Minute {
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
