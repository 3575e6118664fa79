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

// failoverScenario loses a master's recent locks: replication to the
// replicas is cut, the master dies with sections granted on it alone,
// and Sentinel promotes a replica that never saw them. With x, the
// sentinels wait x leases for the dead master before they act
// (down-after), and those sections hold for most of their lease: the
// size of a failover against the lease it may outlast.
var failoverScenario = &Scenario{
	Name: "failover",
	Doc: "replication to the replicas is cut, then the master is killed and Sentinel promotes a replica that never got the recent " +
		"locks; with x, the sentinels wait x leases before they act and the lost sections hold most of their lease",
	Params: map[string]string{"x": "the sentinels' down-after in leases, the sections lost with the master then holding 9/10 of " +
		"their lease (default: the set's own down-after, 1 s, and holds of half a lease)"},
	check: func(v url.Values) error { return checkFloat(v, "x") },
	// One injection a case, whatever the case asks for: the master dies a
	// third into it, and the rest must hold the sentinels' wait, their
	// election and a lost section's hold.
	length: func(p url.Values, lease time.Duration) time.Duration {
		if !p.Has("x") {
			return 0
		}
		return (failoverWait(p, lease) + lease + failoverElection) * 3 / 2
	},
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
}

// failoverElection is what a failover takes beyond the sentinels' wait:
// their agreement, the election of the one that promotes, the promotion,
// with a margin (docs/measurements.md has what it takes here).
const failoverElection = 3 * time.Second

// failoverWait is the sentinels' down-after x asks for, 0 when it asks
// for none (the set's own).
func failoverWait(p url.Values, lease time.Duration) time.Duration {
	return time.Duration(float(p, "x", 0) * float64(lease))
}

// failover cuts replication, kills the master and waits for Sentinel to
// promote a replica, once per case (the set is spent after it).
func failover(e Env) plan {
	t := e.Target
	// Replication is cut first, so that the holders granted next hold
	// keys the replicas never see; they keep their sections for seconds
	// (half a lease, or with x most of it) while the master dies and a
	// replica takes over. Half the clients do that; the other half go on
	// locking, and meet the lost keys on the new master.
	cut := max(e.Spec.Duration/3-time.Second, 200*time.Millisecond)
	wait, held := failoverWait(e.Params, e.Lease), e.Spec.TTL/2
	if wait > 0 {
		held = e.Spec.TTL * 9 / 10
	}
	long := between(cut+200*time.Millisecond, cut+1500*time.Millisecond, judge.Action{Hold: held})
	hold := func(ev judge.SectionEvent) judge.Action {
		if ev.Process%2 == 1 {
			return judge.Action{}
		}
		return long(ev)
	}
	return plan{section: hold, schedule: func(ctx context.Context, nm *Nemesis) {
		if wait > 0 {
			// The set is spent after the case (Fresh): nothing to restore.
			sctx, cancel := context.WithTimeout(ctx, healTimeout)
			err := t.Sentinel.SetDownAfter(sctx, wait)
			cancel()
			if err != nil {
				nm.fail(err)
				return
			}
		}
		if !nm.at(ctx, cut) {
			return
		}
		// The promotion comes the sentinels' wait after the kill.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout+wait)
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
		what := "replication cut, master killed, replica promoted"
		if wait > 0 {
			what += fmt.Sprintf(" (down-after %v)", wait)
		}
		inj := nm.inject(what, e.describe(fctx, []Node{n}))
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
