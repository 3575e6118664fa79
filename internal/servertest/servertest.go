// Package servertest decides whether a test may start servers and how
// long it may then run. It imports nothing of lockbench's, so that the
// test helpers of low packages (remote/remotetest) can use it without
// importing compose; compose/composetest builds its Envs on it.
//
// A test that starts servers — of compose, of a simulated host, or by
// running something that starts them — is marked by StartsServers. Under
// -short (make unit) it is skipped, so that a contributor without the
// servers installed can run every other test in about a minute; make test
// runs it. Once started it has a deadline of its own (DefaultDeadline, one
// minute, unless it says otherwise), its cleanups included: past that it
// fails with a dump of every goroutine, and what it registered with Watch
// is closed, instead of hanging until go test's 10-minute package timeout.
package servertest

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// DefaultDeadline is how long a test that starts servers may run, its
// cleanups included: a hung test fails within a minute of its start. A
// test that legitimately runs longer on a loaded machine (one that starts
// every backend's servers, or runs whole lockbench runs) says so with
// StartsServersWithin.
const DefaultDeadline = time.Minute

// ScaleEnv names the environment variable that multiplies every test's
// deadline (a number such as "3"), for a machine much slower or busier
// than the 2-core machine the deadlines were measured on, or a test held
// in a debugger.
const ScaleEnv = "LOCKBENCH_TEST_DEADLINE_SCALE"

// StartsServers marks tb as a test that starts servers. Under -short it
// skips tb; otherwise it arms tb's deadline, DefaultDeadline from now: if
// tb has not ended by then, cleanups included, every goroutine's stack is
// written to stderr, tb fails, what tb registered with Watch is closed
// (killing its servers unblocks most hangs), and if tb still has not
// ended ten seconds later the test binary panics.
func StartsServers(tb testing.TB) {
	tb.Helper()
	StartsServersWithin(tb, DefaultDeadline)
}

// StartsServersWithin is StartsServers with a deadline of d from now
// instead of DefaultDeadline. A deadline only ever moves later: called
// again for tb, or for a subtest of a test that has a deadline, it moves
// that deadline to d from now if that is later. A subtest runs under its
// parent's deadline when the parent has one, so a test whose subtests
// start servers gives the whole test its budget.
func StartsServersWithin(tb testing.TB, d time.Duration) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts servers: skipped under -short (make unit); make test runs it")
	}
	arm(tb, Scaled(d))
}

// Scaled returns d multiplied by ScaleEnv's value, when that is a
// positive number: the budget of work that must fit in a deadline.
func Scaled(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv(ScaleEnv), 64); err == nil && f > 0 {
		return time.Duration(float64(d) * f)
	}
	return d
}
