// Goroutine clients: a throughput case's clients as goroutines of this
// process, on the in-process judge, and the lockers they drive.

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// localHost names this runner on its in-process judge when its clients
// are goroutines.
const localHost = "local"

// goroutines runs case c with a goroutine of this process per client, on
// the in-process judge, with nemesis n beside them.
func (r *Runner) goroutines(ctx context.Context, id string, c Case, spec workloads.Spec, cfg backends.Config,
	n *nemesis.Nemesis) (*workloads.Outcome, error) {
	if c.Fault.Processes {
		return nil, configErrorf("fault %s stops client processes: run it with clients as processes", c.Fault.Spec)
	}
	lockers, err := open(c.Backend.Name, cfg, spec.Clients)
	if err != nil {
		return nil, err
	}
	defer closeAll(lockers)
	warmup(ctx, id, c, spec, lockers)
	declared, err := c.Backend.declared(spec.TTL, cfg.Params)
	if err != nil {
		return nil, err
	}
	info, err := r.local.Open(ctx, localHost, judge.CaseSpec{ID: id, Guards: c.Guards, Processes: spec.Clients, Duration: spec.Duration,
		TimelineStep: spec.TimelineStep,
		Contract:     judgeContract(declared, spec.TTL)})
	if err != nil {
		return nil, err
	}
	jc := r.local.Case(id)
	n.Attach(ctx, jc, spec.Duration)
	spec.KeyPrefix = info.KeyPrefix
	clients := make([]workloads.Client, len(lockers))
	for i, l := range lockers {
		p := info.FirstProcess + i
		clients[i] = workloads.Client{Process: p, Locker: l, Judge: jc.Local(localHost, p)}
	}
	runErr := workloads.Run(ctx, spec, clients)
	// A client that left without Done — its context ended at the start
	// barrier, after the last one had arrived — is gone, as a worker
	// process is when it exits; Finish would wait for it forever.
	for _, cl := range clients {
		_ = cl.Judge.Close() // never fails in process; a client that said Done is not touched
	}
	rec := n.Stop()
	if ctx.Err() != nil {
		jc.Stop()
	}
	res, err := r.local.Finish(context.WithoutCancel(ctx), localHost, id)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	o := &workloads.Outcome{Info: lockers[0].Info(), ClientsAs: results.ClientsGoroutines, Result: res}
	o.Declared = declared
	r.adopt(o, c, rec)
	if runErr != nil {
		return o, fmt.Errorf("case %s: %w", id, runErr)
	}
	return o, nil
}

// adopt puts what nemesis record rec says of case c into its outcome o,
// and retires the servers of c when the fault left them lost.
func (r *Runner) adopt(o *workloads.Outcome, c Case, rec nemesis.Record) {
	o.Windows, o.Targets, o.FaultFailures = rec.Windows, rec.Targets, rec.Failures
	o.Notes = append(o.Notes, rec.Notes...)
	if rec.Lost != "" {
		r.Clusters.Lost(c.Backend)
	}
}

// open opens one Locker per client, as separate processes would have.
// They open at once: sessions to set up (ZooKeeper, etcd, PostgreSQL)
// cost a round trip or more each.
func open(name string, cfg backends.Config, clients int) ([]locker.Locker, error) {
	lockers := make([]locker.Locker, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range lockers {
		wg.Go(func() { lockers[i], errs[i] = backends.Open(name, cfg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(lockers)
		return nil, err
	}
	return lockers, nil
}

// closeAll closes the lockers at once: a Close may wait for its server
// (a ZooKeeper session's close, an etcd lease's revoke).
func closeAll(lockers []locker.Locker) {
	var wg sync.WaitGroup
	for _, l := range lockers {
		if l != nil {
			wg.Go(func() { _ = l.Close() })
		}
	}
	wg.Wait()
}

// memory is the machine's memory in bytes, from /proc/meminfo (0 when
// unknown).
func memory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int64
	if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err != nil {
		return 0
	}
	return kb * 1024
}
