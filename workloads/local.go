package workloads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// LocalHost names the runner's own host on a judge.
const LocalHost = "local"

// RunCase runs one case whose clients are goroutines of this process, one
// per locker (lockers[i] is client i), refereed by j with the resource
// under guards: it opens the case, installs hooks.Section, runs the load
// and hooks.Nemesis from the start barrier, and returns the outcome. id
// names the case on the judge; the spec's KeyPrefix is replaced by the
// judge's. The outcome is returned with the error when the case ran but
// was cut short.
func RunCase(ctx context.Context, j *judge.Judge, id string, spec Spec, guards []judge.Guard, lockers []locker.Locker, hooks Hooks) (*Outcome, error) {
	s, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	if len(lockers) != s.Clients {
		return nil, locker.Invalidf("%d lockers for %d clients: need one Locker per client", len(lockers), s.Clients)
	}
	info, err := j.Open(ctx, LocalHost, judge.CaseSpec{ID: id, Guards: guards, Processes: s.Clients, Duration: s.Duration, TimelineStep: s.TimelineStep})
	if err != nil {
		return nil, err
	}
	c := j.Case(id)
	c.SetHooks(hooks.Section, nil)
	s.KeyPrefix = info.KeyPrefix
	clients := make([]Client, len(lockers))
	for i, l := range lockers {
		p := info.FirstProcess + i
		clients[i] = Client{Process: p, Locker: l, Judge: c.Local(LocalHost, p)}
	}
	var faults *Faults
	runErr := make(chan error, 1)
	go func() { runErr <- Run(ctx, s, clients) }()
	select {
	case <-c.Started():
		faults = NewFaults(c.Start())
		stop := StartNemesis(ctx, faults, s.Duration, hooks.Nemesis)
		err = <-runErr
		stop()
	case err = <-runErr:
	}
	nemesisEnd := time.Now()
	if ctx.Err() != nil {
		c.Stop()
	}
	res, ferr := j.Finish(context.WithoutCancel(ctx), LocalHost, id)
	if ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	o := &Outcome{Info: lockers[0].Info(), ClientsAs: results.ClientsGoroutines, Result: res}
	if faults != nil {
		o.Faults(faults, nemesisEnd)
	}
	if err != nil {
		return o, fmt.Errorf("case %s: %w", id, err)
	}
	return o, nil
}
