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
		Doc:    "replication to the replicas is cut, then SENTINEL FAILOVER promotes a replica that never got the recent locks",
		Fresh:  true,
		MinTTL: 10 * time.Second,
		fits: func(sh Shape) error {
			if !sh.Sentinel {
				return errors.New("applies to Sentinel, with its replication proxied")
			}
			return nil
		},
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			from, _ := window(spec)
			// The holders granted around the failover keep their sections
			// for seconds (a failover's length), well within their TTL.
			hold := workloads.Between(max(from-time.Second, 0), from+500*time.Millisecond, workloads.Stall{For: spec.TTL / 2, At: workloads.BeforeWrite})
			return workloads.Hooks{Section: hold, Nemesis: func(ctx context.Context, f *workloads.Faults) {
				if !f.At(ctx, from) {
					return
				}
				end := f.Begin("replication cut + failover")
				defer end()
				for _, l := range t.Sentinel.ReplicationLinks {
					_ = l.Partition()
				}
				defer func() {
					for _, l := range t.Sentinel.ReplicationLinks {
						_ = l.Heal()
					}
				}()
				// Let locks be granted on the master alone, then fail over.
				if !f.At(ctx, from+500*time.Millisecond) {
					return
				}
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
				defer cancel()
				_, _ = t.Sentinel.Failover(fctx)
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
				parallel(majority(t), func(n *compose.Node) error { return n.Restart(hctx, false) })
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
				parallel(majority(t), func(n *compose.Node) error {
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
			from, to := window(spec)
			return workloads.Hooks{Nemesis: func(ctx context.Context, f *workloads.Faults) {
				if !f.At(ctx, from) {
					return
				}
				nodes, _ := minority(ctx, t, true)
				end := f.Begin(fmt.Sprintf("%d node(s) down", len(nodes)))
				parallel(nodes, (*compose.Node).Kill)
				f.At(ctx, to)
				end()
				restart(ctx, nodes)
			}}
		},
	},
	{
		Name:    "partition",
		Doc:     "the clients are cut off from a minority of the nodes (their traffic is blackholed) for the window",
		Proxied: true,
		fits:    needMinority,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			from, to := window(spec)
			return workloads.Hooks{Nemesis: func(ctx context.Context, f *workloads.Faults) {
				if !f.At(ctx, from) {
					return
				}
				_, proxies := minority(ctx, t, true)
				end := f.Begin(fmt.Sprintf("%d node(s) partitioned", len(proxies)))
				for _, p := range proxies {
					_ = p.Partition()
				}
				f.At(ctx, to)
				for _, p := range proxies {
					_ = p.Heal()
				}
				end()
			}}
		},
	},
	{
		Name:    "latency",
		Doc:     "responses from a minority of the nodes are delayed by 50 ms for the window",
		Proxied: true,
		fits:    needMinority,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			from, to := window(spec)
			return workloads.Hooks{Nemesis: func(ctx context.Context, f *workloads.Faults) {
				if !f.At(ctx, from) {
					return
				}
				_, proxies := minority(ctx, t, true)
				end := f.Begin(fmt.Sprintf("%d node(s) +50ms", len(proxies)))
				for _, p := range proxies {
					_ = p.Delay(50 * time.Millisecond)
				}
				f.At(ctx, to)
				for _, p := range proxies {
					_ = p.Heal()
				}
				end()
			}}
		},
	},
	{
		Name: "leader-kill",
		Doc:  "the ZooKeeper or etcd leader is killed for the window, then restarted with its data",
		fits: needQuorumCluster,
		hooks: func(t Target, spec workloads.Spec) workloads.Hooks {
			from, to := window(spec)
			return workloads.Hooks{Nemesis: func(ctx context.Context, f *workloads.Faults) {
				if !f.At(ctx, from) {
					return
				}
				leader, err := t.leader(ctx)
				if err != nil {
					return
				}
				end := f.Begin("leader down")
				_ = leader.Kill()
				f.At(ctx, to)
				end()
				restart(ctx, []*compose.Node{leader})
			}}
		},
	},
}

// parallel applies op to every node at once and waits: faults on several
// nodes strike together, as in a rack power loss.
func parallel(nodes []*compose.Node, op func(*compose.Node) error) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { _ = op(n) })
	}
	wg.Wait()
}

// restart brings killed nodes back with their data, even after the run's
// context ended: a nemesis heals what it broke.
func restart(ctx context.Context, nodes []*compose.Node) {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
	defer cancel()
	parallel(nodes, func(n *compose.Node) error { return n.Start(hctx) })
}
