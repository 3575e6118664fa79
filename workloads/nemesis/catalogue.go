package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/workloads"
)

// healTimeout bounds how long a nemesis waits for a node to come back
// when it heals after its window.
const healTimeout = time.Minute

// catalogue is every scenario, in the order reports list them.
var catalogue = []*Scenario{
	{
		Name: "none",
		Doc:  "no fault: the baseline",
	},
	{
		Name: "client-pause",
		Doc:  "every 10th holder granted in the middle two thirds of the run stalls for 1.5× its TTL after reading, then writes (the GC pause)",
		hooks: func(_ Target, spec workloads.Spec) workloads.Hooks {
			// Each pause holds the key until its lease expires: a wide
			// window lets several happen in one run.
			from, to := spec.Duration/6, spec.Duration*5/6
			every := workloads.EveryNth(10, workloads.Stall{For: spec.TTL * 3 / 2, At: workloads.BeforeWrite, Label: "client-pause"})
			return workloads.Hooks{Section: func(i workloads.SectionInfo) workloads.Stall {
				if i.Granted < from || i.Granted >= to {
					return workloads.Stall{}
				}
				return every(i)
			}}
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
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			// Replication is cut first, so that the holders granted next
			// hold keys the replicas never see; they keep their sections
			// for seconds (a failover's length, well within their TTL)
			// while the master dies and a replica takes over.
			// Half the clients do that; the other half go on locking, and
			// meet the lost keys on the new master.
			cut := max(spec.Duration/3-time.Second, 200*time.Millisecond)
			long := workloads.Between(cut+200*time.Millisecond, cut+1500*time.Millisecond, workloads.Stall{For: spec.TTL / 2, At: workloads.BeforeWrite})
			hold := func(i workloads.SectionInfo) workloads.Stall {
				if i.Client%2 == 1 {
					return workloads.Stall{}
				}
				return long(i)
			}
			return workloads.Hooks{Section: hold, Nemesis: func(ctx context.Context, f *workloads.Faults) {
				if !f.At(ctx, cut) {
					return
				}
				end := f.Begin("replication cut, master killed, replica promoted")
				defer end()
				for _, l := range t.Sentinel.ReplicationLinks {
					f.Fail(l.Partition())
				}
				// Let locks be granted on the master alone, then lose it.
				// (A forced SENTINEL FAILOVER refuses a replica whose link is
				// held back; a dead master is what Sentinel is for.)
				if !f.At(ctx, cut+time.Second) {
					return
				}
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
				defer cancel()
				defer func() {
					for _, l := range t.Sentinel.ReplicationLinks {
						f.Fail(l.Heal())
					}
				}()
				old, err := t.Sentinel.CurrentMaster(fctx)
				if err != nil {
					f.Fail(err)
					return
				}
				n := t.Sentinel.Node(old)
				if n == nil {
					f.Fail(fmt.Errorf("the master %s is none of the set's nodes", old))
					return
				}
				f.Fail(n.Kill())
				_, err = t.Sentinel.AwaitNewMaster(fctx, old)
				f.Fail(err)
			}}
		},
	},
	{
		Name:   "restart",
		Doc:    "a majority of the Redis nodes (3 of 5; the one of a single Redis) are killed and restarted without their data while their keys are held",
		MinTTL: 2 * time.Second,
		fits:   needRedis,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			from, _ := window(spec)
			return workloads.Hooks{Section: holdAcross(spec, from), Nemesis: func(ctx context.Context, f *workloads.Faults) {
				if !f.At(ctx, from) {
					return
				}
				end := f.Begin("restart without data")
				defer end()
				hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
				defer cancel()
				each(f, majority(t), func(n *compose.Node) error { return n.Restart(hctx, false) })
			}}
		},
	},
	{
		Name:   "clock-jump",
		Doc:    "the clocks of a majority of the Redis nodes jump forward by the TTL: every key there expires at once",
		MinTTL: 2 * time.Second,
		fits:   needRedis,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			from, _ := window(spec)
			return workloads.Hooks{Section: holdAcross(spec, from), Nemesis: func(ctx context.Context, f *workloads.Faults) {
				if !f.At(ctx, from) {
					return
				}
				end := f.Begin(fmt.Sprintf("clock +%v", spec.TTL))
				defer end()
				each(f, majority(t), func(n *compose.Node) error {
					_, err := n.ShiftClock(context.WithoutCancel(ctx), spec.TTL)
					return err
				})
			}}
		},
	},
	{
		Name: "crash-minority",
		Doc:  "a minority of nodes (2 of 5 Redis nodes, a follower of 3 ZooKeeper or etcd members) is killed for the window, then restarted with its data",
		fits: needMinority,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			return during(spec, "node(s) down",
				minorityNodes(t), func(_ context.Context, n *compose.Node) error { return n.Kill() }, start)
		},
	},
	{
		Name:    "partition",
		Doc:     "the clients are cut off from a minority of the nodes (their traffic is blackholed) for the window",
		Proxied: true,
		fits:    needMinority,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			return during(spec, "node(s) partitioned",
				minorityProxies(t), func(_ context.Context, p *compose.Proxy) error { return p.Partition() }, heal)
		},
	},
	{
		Name:    "latency",
		Doc:     "responses from a minority of the nodes are delayed by 50 ms for the window",
		Proxied: true,
		fits:    needMinority,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			return during(spec, "node(s) +50ms",
				minorityProxies(t), func(_ context.Context, p *compose.Proxy) error { return p.Delay(50 * time.Millisecond) }, heal)
		},
	},
	{
		Name: "leader-kill",
		Doc:  "the ZooKeeper or etcd leader is killed for the window, then restarted with its data",
		fits: needQuorumCluster,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			return during(spec, "leader down",
				func(ctx context.Context) ([]*compose.Node, error) {
					leader, err := t.leader(ctx)
					if err != nil {
						return nil, err
					}
					return []*compose.Node{leader}, nil
				},
				func(_ context.Context, n *compose.Node) error { return n.Kill() }, start)
		},
	},
}

// during is the shape of the faults that last the whole window: when it
// opens, pick the targets and break them all at once; when it closes,
// undo it (even if the run's context has ended: a nemesis heals what it
// broke). The window is recorded with the number of targets and label;
// trouble picking the targets is a failure of the fault (Faults.Fail).
func during[T any](spec workloads.Spec, label string, pick func(context.Context) ([]T, error), fault, undo func(context.Context, T) error) workloads.Hooks {
	from, to := window(spec)
	return workloads.Hooks{Nemesis: func(ctx context.Context, f *workloads.Faults) {
		if !f.At(ctx, from) {
			return
		}
		targets, err := pick(ctx)
		if err == nil && len(targets) == 0 {
			err = errors.New("no target")
		}
		if err != nil && ctx.Err() == nil {
			f.Fail(fmt.Errorf("%s: %w", label, err))
		}
		if len(targets) == 0 {
			return
		}
		end := f.Begin(fmt.Sprintf("%d %s", len(targets), label))
		each(f, targets, func(x T) error { return fault(ctx, x) })
		f.At(ctx, to)
		end()
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
		defer cancel()
		each(f, targets, func(x T) error { return undo(hctx, x) })
	}}
}

// start brings a killed node back with its data.
func start(ctx context.Context, n *compose.Node) error { return n.Start(ctx) }

// heal removes a proxy's faults.
func heal(_ context.Context, p *compose.Proxy) error { return p.Heal() }

// each applies op to every target at once and waits: faults on several
// nodes strike together, as in a rack power loss.
func each[T any](f *workloads.Faults, targets []T, op func(T) error) {
	var wg sync.WaitGroup
	for _, x := range targets {
		wg.Go(func() { f.Fail(op(x)) })
	}
	wg.Wait()
}
