package nemesis

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/workloads"
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
	serverPause,
	{
		Name:   "failover",
		Doc:    "replication to the replicas is cut, then the master is killed and Sentinel promotes a replica that never got the recent locks",
		Fresh:  true,
		MinTTL: 10 * time.Second,
		// On one hot key the replica holds, at the cut, the lease of
		// whoever held the key then, released on the master only: after
		// the failover that zombie blocks the key for a TTL and nobody
		// gets it twice. A lock lost in a failover is a key that was free
		// when replication stopped, so the scenario runs on many keys.
		Workload: workloads.UniformKeys,
		Requires: Failover,
		plan:     failover,
	},
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

// failover cuts replication, kills the master and waits for Sentinel to
// promote a replica, once per case (the set is spent after it).
func failover(e Env) plan {
	t := e.Target
	// Replication is cut first, so that the holders granted next hold
	// keys the replicas never see; they keep their sections for seconds
	// (a failover's length, well within their TTL) while the master dies
	// and a replica takes over. Half the clients do that; the other half
	// go on locking, and meet the lost keys on the new master.
	cut := max(e.Spec.Duration/3-time.Second, 200*time.Millisecond)
	long := between(cut+200*time.Millisecond, cut+1500*time.Millisecond, judge.Action{Hold: e.Spec.TTL / 2})
	hold := func(ev judge.SectionEvent) judge.Action {
		if ev.Process%2 == 1 {
			return judge.Action{}
		}
		return long(ev)
	}
	return plan{section: hold, schedule: func(ctx context.Context, nm *Nemesis) {
		if !nm.at(ctx, cut) {
			return
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
		defer cancel()
		old, err := t.Sentinel.CurrentMaster(fctx)
		if err != nil {
			nm.fail(err)
			return
		}
		n := t.Sentinel.Node(old)
		if n == nil {
			nm.fail(fmt.Errorf("the master %s is none of the set's nodes", old))
			return
		}
		inj := nm.inject("replication cut, master killed, replica promoted", e.describe(fctx, []Node{n}))
		defer inj.end()
		for _, l := range t.Sentinel.ReplicationLinks() {
			nm.fail(l.Partition())
		}
		defer func() {
			for _, l := range t.Sentinel.ReplicationLinks() {
				nm.fail(l.Heal())
			}
		}()
		// Let locks be granted on the master alone, then lose it. (A
		// forced SENTINEL FAILOVER refuses a replica whose link is held
		// back; a dead master is what Sentinel is for.)
		if !nm.at(ctx, cut+time.Second) {
			inj.prove(proof{whyNot: "the case ended before the master was killed"})
			return
		}
		// The failover tests exclusion if sections granted on the master
		// after the cut (which the replicas never saw) are open when it
		// dies.
		var (
			after []string
			lost  = map[int64]bool{}
		)
		for _, o := range nm.live().Open {
			if o.Granted >= cut {
				after = append(after, fmt.Sprintf("section %d (granted at %.2fs)", o.Section, o.Granted.Seconds()))
				lost[o.Section] = true
			}
		}
		pid := n.PID()
		if err := n.Kill(); err != nil {
			nm.fail(err)
			inj.prove(proof{whyNot: "the master would not die: " + err.Error()})
			return
		}
		from := time.Now()
		grants := nm.live().Grants // every grant after these comes from the new master
		promoted, err := t.Sentinel.AwaitNewMaster(fctx, old)
		if err != nil {
			nm.fail(err)
			inj.prove(proof{whyNot: "no replica was promoted: " + err.Error()})
			return
		}
		p := proof{effect: fmt.Sprintf("master %s (%s, pid %d) killed; the sentinels promoted %s %v later",
			n, old, pid, promoted, time.Since(from).Round(10*time.Millisecond))}
		if len(after) == 0 {
			p.precondition = "no section granted after the replication cut was open when the master died"
			p.whyNot = p.precondition
			inj.prove(p)
			return
		}
		p.precondition = fmt.Sprintf("open on the master alone when it died: %s", strings.Join(after, ", "))
		served, why := servedWhileOpen(ctx, nm, grants, lost)
		p.tested, p.whyNot = served, why
		if served {
			p.precondition += "; the new master granted while one was still open"
		}
		inj.prove(p)
	}}
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

// servedWhileOpen waits until the lock grants anew (its grants pass
// grants) while one of the lost sections is still open, and reports
// whether it did, or why not. A failover tests exclusion only then: a
// section lost with the old master is a double grant waiting to happen
// only once the new master serves clients, who may then be granted its
// key again; a case that ends, or sections that end, before the clients
// reach the new master tested nothing (on a loaded machine they can take
// seconds to follow the promotion).
func servedWhileOpen(ctx context.Context, nm *Nemesis, grants int64, lost map[int64]bool) (bool, string) {
	return reachedWhileOpen(ctx, nm, danger{
		lost:    lost,
		granted: func(l judge.Live) bool { return l.Grants > grants },
		raced:   "the sections lost with the master ended as the new master began to grant (within one look at the judge's view): not counted",
		ended:   "the sections lost with the master ended before the new master granted anything",
		late:    "the case ended before the new master granted anything",
	})
}
