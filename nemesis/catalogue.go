package nemesis

import (
	"net/url"
	"time"

	"github.com/lockbench/lockbench/judge"
)

// healTimeout bounds how long a nemesis waits for a node to come back
// when it heals after its window.
const healTimeout = time.Minute

// window is how long a fault that lasts stays in effect: long enough for
// leases to run out and, in a quorum cluster, for a new leader to be
// elected (measured here: etcd, election timeout 300 ms, in 0.3–0.5 s;
// ZooKeeper, tick 200 ms, in 1.3–1.8 s).
func (e Env) window() time.Duration { return windowFor(e.Target.Shape(), e.Lease) }

// windowFor is window on a cluster of shape sh, for a backend whose lease
// is lease.
func windowFor(sh Shape, lease time.Duration) time.Duration {
	if sh.Has(Election) {
		return max(lease, 2*time.Second)
	}
	return max(lease, time.Second)
}

// lasting is the span of a fault that lasts a window: the window and the
// gap after it.
func lasting(_ url.Values, sh Shape, lease time.Duration) time.Duration {
	return windowFor(sh, lease) + lease/2
}

// instantly is the span of a fault that strikes at once: the lease it
// leaves the backend to settle.
func instantly(_ url.Values, _ Shape, lease time.Duration) time.Duration { return lease }

// quorumCase is the case length of the faults a quorum cluster must
// elect through: two windows of 2 s, with the recovery after each.
const quorumCase = 10 * time.Second

// gap is the least time between the end of one injection's window and
// the next injection: the time for grants to resume.
func (e Env) gap() time.Duration { return e.Lease / 2 }

// clientPause is how long client-pause stops a holder: x leases.
func clientPause(p url.Values, lease time.Duration) time.Duration {
	return time.Duration(float(p, "x", 1.5) * float64(lease))
}

// clientPauseGap separates one client pause from the next: the paused
// holder writes, ends and releases (milliseconds), and the lock serves
// others, before another holder stops.
func clientPauseGap(time.Duration) time.Duration { return 250 * time.Millisecond }

// catalogue is every scenario, in the order reports list them.
var catalogue = []*Scenario{
	{
		Name: "none",
		Doc:  "no fault: the baseline",
	},
	{
		Name: "client-pause",
		Doc: "a client's process is stopped (SIGSTOP) for x times the backend's lease (its TTL, or its session timeout when longer), then " +
			"resumed, at a point of its cycle: " +
			"after its read (default: it writes late, the GC pause), before its first access, after its write, inside Acquire, between Acquire's " +
			"return and its report to the judge, " +
			"or inside an extension of its auto-extending lease; " +
			"where each pause landed is recorded",
		Params: map[string]string{"x": "the pause in leases (default 1.5)",
			"at": "after-read (default), before-read, after-write, acquire, granted or extend (needs auto-extending leases)"},
		Processes: true,
		check:     checkClientPause,
		// Pauses never overlap: two at once would be one incident of the
		// overlap counter, and rates per injection would count too few.
		span: func(p url.Values, _ Shape, lease time.Duration) time.Duration {
			return clientPause(p, lease) + clientPauseGap(lease)
		},
		plan: clientPausePlan,
	},
	clientClock,
	serverPause,
	failoverScenario,
	restart,
	crash,
	powerLoss,
	clockJump,
	clockRate,
	crashMinority,
	partition,
	latency,
	partitionLeader,
	partitionHalves,
	leaderKill,
	mixed,
	splitView,
	clientLeader,
}

// between returns a section hook that gives a every section granted in
// [from, to) from the start of the case, and leaves the others alone.
func between(from, to time.Duration, a judge.Action) judge.SectionHook {
	return func(e judge.SectionEvent) judge.Action {
		if e.Granted < from || e.Granted >= to {
			return judge.Action{}
		}
		return a
	}
}
