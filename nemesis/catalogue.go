package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/lockbench/lockbench/compose"
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
	if sh.Elects {
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
		Doc: "a client's process is stopped (SIGSTOP) for x times the backend's lease (its TTL, or its session timeout when longer), then resumed, at a point of its cycle: " +
			"after its read (default: it writes late, the GC pause), before its first access, after its write, inside Acquire, or inside an extension of its auto-extending lease; " +
			"where each pause landed is recorded",
		Params: map[string]string{"x": "the pause in leases (default 1.5)",
			"at": "after-read (default), before-read, after-write, acquire or extend (needs auto-extending leases)"},
		Processes: true,
		check:     checkClientPause,
		// Pauses never overlap: two at once would be one incident of the
		// overlap counter, and rates per injection would count too few.
		span: func(p url.Values, _ Shape, lease time.Duration) time.Duration {
			return clientPause(p, lease) + clientPauseGap(lease)
		},
		plan: clientPausePlan,
	},
	{
		Name:           "server-pause",
		span:           lasting,
		QuorumDuration: quorumCase,
		Doc:            "servers are stopped (SIGSTOP) for a lease (at least a second), then resumed: a random minority, or the leader (every other injection; the master of a Sentinel set, the single server of a one-node backend)",
		fits: func(sh Shape) error {
			if sh.Nodes == 0 {
				return errors.New("applies to backends with servers")
			}
			return nil
		},
		plan: func(e Env) plan {
			return e.repeat(e.window(), e.gap(), "paused", func(ctx context.Context, i int) ([]*compose.Node, error) {
				if i%2 == 0 || len(e.Target.Nodes) == 1 {
					if l, err := e.Target.leader(ctx); l != nil || err != nil {
						return []*compose.Node{l}, err
					}
				}
				return e.minority(), nil
			}, perNode(func(_ context.Context, n *compose.Node) error { return n.Pause() }),
				perNode(func(_ context.Context, n *compose.Node) error { return n.Resume() }))
		},
	},
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
		fits: func(sh Shape) error {
			if !sh.Sentinel {
				return errors.New("applies to Sentinel, with its replication proxied")
			}
			return nil
		},
		plan: failover,
	},
	{
		Name:   "restart",
		span:   instantly,
		Doc:    "a random majority of the Redis nodes (the single server of redis, the PostgreSQL server) is killed and restarted while their keys are held: empty under the fast profile, with its data under the durable one",
		MinTTL: 2 * time.Second,
		fits: func(sh Shape) error {
			if sh.Nodes == 0 {
				return errors.New("applies to backends with servers")
			}
			return nil
		},
		plan: func(e Env) plan {
			keep := e.Durable || e.Target.KeepsData
			label := "restart without data"
			if keep {
				label = "restart with data"
			}
			return e.instant(e.Lease, label, e.majority, func(ctx context.Context, n *compose.Node) error {
				return n.Restart(ctx, keep)
			})
		},
	},
	{
		Name:   "clock-jump",
		span:   instantly,
		Doc:    "an emulated clock jump (Redis has no clock to set, and libfaketime crashes it): every key on a random minority or majority of the Redis nodes has its expiry brought forward by a fraction of the TTL at once",
		Params: map[string]string{"by": "the jump in key lifetimes: the TTL, or longer where the backend keeps its keys longer (default 1)", "nodes": "minority or majority (default)"},
		Note:   "clock-jump is an emulation: Redis has no clock to set (and libfaketime crashes Debian's redis-server), so a script brings every key's expiry forward on the chosen nodes, which is what a wall-clock jump does to Redis's expiries",
		MinTTL: 2 * time.Second,
		fits: func(sh Shape) error {
			if !sh.ClockShift {
				return errors.New("applies to servers whose key expiries can be moved (Redis)")
			}
			return nil
		},
		check: func(v url.Values) error {
			if n := v.Get("nodes"); n != "" && n != "minority" && n != "majority" {
				return fmt.Errorf("nodes=%q: want minority or majority", n)
			}
			return checkFloat(v, "by")
		},
		plan: func(e Env) plan {
			// The jump is sized from how long the keys live on the
			// servers, not from the lease the holder is promised: a lock
			// that keeps its keys longer than its leases (rueidislock)
			// must not be spared by a jump its keys outlive.
			by := time.Duration(float(e.Params, "by", 1) * float64(max(e.KeyLife, e.Spec.TTL)))
			pick, which := e.majority, "majority"
			if e.Params.Get("nodes") == "minority" {
				pick, which = e.minority, "minority"
			}
			return e.instant(e.Lease, fmt.Sprintf("emulated clock jump +%v on a %s", by, which), pick, func(ctx context.Context, n *compose.Node) error {
				_, err := n.ShiftClock(ctx, by)
				return err
			})
		},
	},
	{
		Name: "crash-minority",
		span: lasting,
		Doc:  "a random minority of the nodes (2 of 5 Redis nodes, 1 of 3 members: any of them, the leader or a priority node included) is killed for a lease (at least a second), then restarted with what it persisted",
		fits: needMinority,
		plan: func(e Env) plan {
			return e.repeat(e.window(), e.gap(), "down", func(context.Context, int) ([]*compose.Node, error) { return e.minority(), nil },
				perNode(func(_ context.Context, n *compose.Node) error { return n.Kill() }), perNode(start))
		},
	},
	{
		Name:    "partition",
		span:    lasting,
		Doc:     "the clients are cut off (their traffic blackholed) from a random minority of the nodes, or from the single server, for a lease (at least a second)",
		Proxied: true,
		fits:    needCut,
		plan: func(e Env) plan {
			return e.repeat(e.window(), e.gap(), "partitioned from the clients", func(context.Context, int) ([]*compose.Node, error) { return e.minority(), nil },
				perNode(cutClients), perNode(healClients))
		},
	},
	{
		Name:    "latency",
		span:    lasting,
		Doc:     "responses from a random minority of the nodes, or from the single server, are delayed by 50 ms for a lease (at least a second)",
		Proxied: true,
		fits:    needProxied,
		plan: func(e Env) plan {
			return e.repeat(e.window(), e.gap(), "+50ms", func(context.Context, int) ([]*compose.Node, error) { return e.minority(), nil },
				perNode(func(_ context.Context, n *compose.Node) error { return n.Delay(50 * time.Millisecond) }), perNode(heal))
		},
	},
	{
		Name: "partition-leader",
		span: lasting,
		Doc:  "the ZooKeeper or etcd leader is cut off from the other members (their traffic dropped both ways; clients still reach every member) for 2 s, then healed",
		fits: needPeers, QuorumDuration: quorumCase,
		plan: func(e Env) plan {
			return e.peerCut("cut off from the other members", func(ctx context.Context, _ int) ([]*compose.Node, error) {
				l, err := e.Target.leader(ctx)
				return []*compose.Node{l}, err
			})
		},
	},
	{
		Name: "partition-halves",
		span: lasting,
		Doc:  "the ZooKeeper or etcd members are split into a random minority and the majority (the leader on either side), which cannot reach each other, for 2 s, then healed",
		fits: needPeers, QuorumDuration: quorumCase,
		plan: func(e Env) plan {
			return e.peerCut("split from the majority", func(context.Context, int) ([]*compose.Node, error) { return e.minority(), nil })
		},
	},
	{
		Name:           "leader-kill",
		span:           lasting,
		QuorumDuration: quorumCase,
		Doc:            "the ZooKeeper or etcd leader is killed for 2 s, then restarted with its data",
		fits: func(sh Shape) error {
			if !sh.Elects {
				return errors.New("applies to clusters whose members elect their leader (ZooKeeper, etcd)")
			}
			return nil
		},
		plan: func(e Env) plan {
			return e.repeat(e.window(), e.gap(), "leader down", func(ctx context.Context, _ int) ([]*compose.Node, error) {
				l, err := e.Target.leader(ctx)
				return []*compose.Node{l}, err
			}, perNode(func(_ context.Context, n *compose.Node) error { return n.Kill() }), perNode(start))
		},
	},
}

func needPeers(sh Shape) error {
	switch {
	case !sh.Elects:
		return errors.New("applies to clusters whose members elect their leader among themselves (ZooKeeper, etcd)")
	case !sh.Members:
		return errors.New("needs the members in network namespaces of their own (compose's PeerNetwork: root and the ip command)")
	}
	return nil
}

func needMinority(sh Shape) error {
	if sh.Nodes >= 3 {
		return nil
	}
	return errors.New("needs a cluster of at least 3 nodes")
}

// needCut: the nodes' clients can be cut off, through proxies or by
// rules on the hosts.
func needCut(sh Shape) error {
	if sh.Proxied || sh.ClientCuts {
		return nil
	}
	return errors.New("needs servers the clients reach through proxies, or placed on hosts whose links can be cut")
}

// cutClients cuts a node off from its clients: through its proxy, or by
// rules on its host and theirs, and then proves the cut (no client host
// reaches it; the control node still does).
func cutClients(ctx context.Context, n *compose.Node) error {
	if n.Proxy() != nil {
		return n.Partition()
	}
	if err := n.CutClients(); err != nil {
		return err
	}
	// The proof belongs to the injection, not to the case: a cut that
	// struck near the case's end (commands over SSH take seconds on a busy
	// machine) is proven all the same, not failed by the case's deadline.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return n.Unreachable(pctx, 2*time.Second)
}

// healClients lifts cutClients.
func healClients(_ context.Context, n *compose.Node) error {
	if n.Proxy() != nil {
		return n.Heal()
	}
	return n.HealClients()
}

func needProxied(sh Shape) error {
	if sh.Proxied {
		return nil
	}
	return errors.New("needs servers the clients reach through proxies")
}

// start brings a killed node back with its data.
func start(ctx context.Context, n *compose.Node) error { return n.Start(ctx) }

// heal removes a node's proxy faults.
func heal(_ context.Context, n *compose.Node) error { return n.Heal() }

// groupOp acts on the targets of an injection together, recording its
// trouble with nm.fail.
type groupOp func(ctx context.Context, nm *Nemesis, nodes []*compose.Node)

// perNode is a groupOp that applies op to every node at once.
func perNode(op func(context.Context, *compose.Node) error) groupOp {
	return func(ctx context.Context, nm *Nemesis, nodes []*compose.Node) {
		each(nm, nodes, func(n *compose.Node) error { return op(ctx, n) })
	}
}

// repeat is the shape of the faults that last a window: at each of the
// case's slots, pick the targets (i numbers the injection), break them
// all at once, wait length, undo it (even if the case's context has
// ended: a nemesis heals what it broke) and close the window. Trouble
// picking the targets, breaking or healing them is a failure of the fault.
func (e Env) repeat(length, gap time.Duration, label string, pick func(context.Context, int) ([]*compose.Node, error), fault, undo groupOp) plan {
	at := e.slots(length, gap)
	return plan{schedule: func(ctx context.Context, nm *Nemesis) {
		for i, t := range at {
			if !nm.at(ctx, t) {
				return
			}
			nodes, err := pick(ctx, i)
			if err == nil && len(nodes) == 0 {
				err = errors.New("no target")
			}
			if err != nil {
				if ctx.Err() == nil {
					nm.fail(fmt.Errorf("%s: picking the targets: %w", label, err))
				}
				continue
			}
			end := nm.inject(fmt.Sprintf("%s %s", names(nodes), label), e.describe(ctx, nodes))
			fault(ctx, nm, nodes)
			nm.at(ctx, t+length)
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
			undo(hctx, nm, nodes)
			cancel()
			end()
		}
	}}
}

// peerCut partitions the picked members from the others at each slot,
// heals after the window, and waits until every member serves again
// before the next injection (a connection that lived through the cut
// recovers only at its next retransmission).
func (e Env) peerCut(label string, pick func(context.Context, int) ([]*compose.Node, error)) plan {
	p := e.Target.Members
	return e.repeat(e.window(), e.gap(), label, pick, func(_ context.Context, nm *Nemesis, nodes []*compose.Node) {
		nm.fail(p.Partition(nodes))
	}, func(ctx context.Context, nm *Nemesis, _ []*compose.Node) {
		nm.fail(p.HealPartition())
		nm.fail(p.AwaitServing(ctx))
	})
}

// instant is the shape of the faults that strike at once and need no
// undoing (a restart, a clock jump): at each slot, the sections granted
// around it hold across it, and op strikes the picked nodes. gap leaves
// room after each for the backend to settle (a quarantine to end).
func (e Env) instant(gap time.Duration, label string, pick func() []*compose.Node, op func(context.Context, *compose.Node) error) plan {
	at := e.slots(0, gap)
	// Whoever holds the key when the fault strikes is still inside its
	// section for at least half a TTL, and within its lease, so that an
	// overlap is the fault's doing, not an expired lease's.
	long := judge.Action{Hold: e.Spec.TTL * 3 / 4}
	hold := func(ev judge.SectionEvent) judge.Action {
		for _, t := range at {
			if ev.Granted >= max(t-e.Spec.TTL/4, 0) && ev.Granted < t+e.Spec.TTL/4 {
				return long
			}
		}
		return judge.Action{}
	}
	return plan{section: hold, schedule: func(ctx context.Context, nm *Nemesis) {
		for _, t := range at {
			if !nm.at(ctx, t) {
				return
			}
			nodes := pick()
			end := nm.inject(fmt.Sprintf("%s %s", names(nodes), label), e.describe(ctx, nodes))
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
			each(nm, nodes, func(n *compose.Node) error { return op(hctx, n) })
			cancel()
			end()
		}
	}}
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
		end := nm.inject("replication cut, master killed, replica promoted", e.describe(fctx, []*compose.Node{n}))
		defer end()
		for _, l := range t.Sentinel.ReplicationLinks {
			nm.fail(l.Partition())
		}
		defer func() {
			for _, l := range t.Sentinel.ReplicationLinks {
				nm.fail(l.Heal())
			}
		}()
		// Let locks be granted on the master alone, then lose it. (A
		// forced SENTINEL FAILOVER refuses a replica whose link is held
		// back; a dead master is what Sentinel is for.)
		if !nm.at(ctx, cut+time.Second) {
			return
		}
		nm.fail(n.Kill())
		_, err = t.Sentinel.AwaitNewMaster(fctx, old)
		nm.fail(err)
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
