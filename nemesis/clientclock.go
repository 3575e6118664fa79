package nemesis

import (
	"net/url"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/worker"
)

// The client-clock scenario stops a client that is in Acquire for x
// leases, as client-pause?at=acquire does, with the clock its lock
// measures validity on standing still throughout (worker.ClockSignal:
// the worker stops itself): a virtual machine suspended in the middle of
// an Acquire, whose monotonic clock did not count the suspension.
// Redlock's safety assumes that this clock counts every moment (bounded
// drift). A stop that lands after the nodes granted, or while a waiter
// is being handed the key, outlasts the keys, which another client may
// then be granted, while the stopped client's validity check, on its
// clock, still passes. The same stop with a clock that counts it is
// client-pause?at=acquire, the control.
var clientClock = &Scenario{
	Name: "client-clock",
	Doc: "a client in Acquire stops for x times the backend's lease with its lock's clock standing still throughout " +
		"(a virtual machine suspended mid-Acquire, whose clock misses the suspension); where each stop landed is recorded",
	Params:    map[string]string{"x": "the stop in leases (default 1.5)"},
	Processes: true,
	Requires:  ClientClock,
	check:     func(v url.Values) error { return checkFloat(v, "x") },
	span: func(p url.Values, _ Shape, lease time.Duration) time.Duration {
		return clientPause(p, lease) + clientPauseGap(lease)
	},
	plan: clientClockPlan,
}

// clientClockPlan picks, in each slot, a client that is in Acquire,
// makes it stop with its clock and resumes it after x leases.
func clientClockPlan(e Env) plan {
	d := clientPause(e.Params, e.Lease)
	return aimedPauses(e, e.slots(d, clientPauseGap(e.Lease)), d, history.PointAcquire, &selfStop{worker.ClockSignal, inClock})
}
