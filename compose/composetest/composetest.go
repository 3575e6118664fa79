// Package composetest is what tests need of compose: a compose.Env per
// test, servers that the tests of a package share, and the one place that
// decides whether a test may start servers and how long it may then run.
//
// A test that starts servers — through ForTest or a Shared, or by running
// something that starts them, such as a lockbench run — is marked by
// StartsServers. Under -short (make unit) it is skipped, so that a
// contributor without the servers installed can run every other test in
// about a minute; make test runs it. Once started it has Deadline to
// finish, its cleanups included: past that it fails with a dump of every
// goroutine instead of hanging until go test's 10-minute package timeout.
package composetest

import (
	"os"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
)

// DeadlineEnv names the environment variable that sets Deadline for a run
// (a Go duration such as "3m"), for a machine much slower than the ones
// the default was measured on, or a test held in a debugger.
const DeadlineEnv = "LOCKBENCH_TEST_DEADLINE"

// DefaultDeadline is how long a test that starts servers may run, its
// cleanups included, unless DeadlineEnv says otherwise. The slowest such
// test took about 30 s on a loaded 2-core machine; a hung one is failed
// within a minute of its start.
const DefaultDeadline = time.Minute

// StartsServers marks tb as a test that starts servers. Under -short it
// skips tb; otherwise it arms tb's deadline (see Deadline): if tb has not
// ended, cleanups included, by then, every goroutine's stack is written to
// stderr, tb fails, the servers of its Envs are killed (which unblocks
// most hangs), and if tb still has not ended ten seconds later the test
// binary panics. Calling it again for the same tb does nothing more.
func StartsServers(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts servers: skipped under -short (make unit); make test runs it")
	}
	arm(tb)
}

// ForTest returns a compose.Env in a temporary directory, closed when tb
// ends; tb StartsServers. On failure the last lines of every node's log
// are written to the test log, which is usually where the reason is.
func ForTest(tb testing.TB) *compose.Env {
	tb.Helper()
	StartsServers(tb)
	e, err := compose.New(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, n := range e.Nodes() {
				tb.Logf("--- %s log (tail) ---\n%s", n.Name, n.LogTail(2048))
			}
		}
		if err := e.Close(); err != nil {
			tb.Error(err)
		}
	})
	watching(tb, e)
	return e
}

// Deadline is how long a test that starts servers may run: DeadlineEnv's
// value, or DefaultDeadline when it is unset or not a positive duration.
func Deadline() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(DeadlineEnv)); err == nil && d > 0 {
		return d
	}
	return DefaultDeadline
}
