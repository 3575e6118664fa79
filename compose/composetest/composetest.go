// Package composetest is what tests need of compose: a compose.Env per
// test and servers that the tests of a package share. Whether a test may
// start servers and how long it may then run is decided by
// internal/servertest, which StartsServers and Context forward to (so
// that test helpers below compose need not import it); an Env of ForTest
// is killed at its test's deadline.
//
// A test that starts servers — through ForTest or a Shared, or by running
// something that starts them, such as a lockbench run — is marked by
// StartsServers. Under -short (make unit) it is skipped; make test runs it.
package composetest

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/internal/servertest"
)

// DefaultDeadline is how long a test that starts servers may run, its
// cleanups included (servertest.DefaultDeadline).
const DefaultDeadline = servertest.DefaultDeadline

// ScaleEnv names the environment variable that multiplies every test's
// deadline (servertest.ScaleEnv).
const ScaleEnv = servertest.ScaleEnv

// StartsServers marks tb as a test that starts servers: skipped under
// -short, failed past DefaultDeadline (servertest.StartsServers).
func StartsServers(tb testing.TB) {
	tb.Helper()
	servertest.StartsServersWithin(tb, DefaultDeadline)
}

// StartsServersWithin is StartsServers with a deadline of d from now
// (servertest.StartsServersWithin).
func StartsServersWithin(tb testing.TB, d time.Duration) {
	tb.Helper()
	servertest.StartsServersWithin(tb, d)
}

// Context returns a context for the work of tb that ends a tenth of tb's
// deadline before it (servertest.Context).
func Context(tb testing.TB) context.Context {
	tb.Helper()
	return servertest.Context(tb)
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
	servertest.Watch(tb, e)
	return e
}
