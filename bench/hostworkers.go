package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/worker"
	"github.com/lockbench/lockbench/workloads"
)

// hostWorker is a client process on a host: a daemon with a pidfile,
// which reads its assignment from a file there.
type hostWorker struct {
	process int
	host    *Host
	proc    remote.Proc
	log     string
}

// hostProcesses runs case c with its client processes spread over the
// client hosts (process i on host i mod k), each a daemon started with a
// pidfile, against the run's judge (this runner's, or the one on the
// judge's host), with nemesis n beside them as the judge's peer. It
// watches them by their pidfiles: a worker gone without Done is dead to
// the judge, with the end of its log as the reason.
func (r *Runner) hostProcesses(ctx context.Context, id string, c Case, spec workloads.Spec, cfg backends.Config,
	n *nemesis.Nemesis) (*workloads.Outcome, error) {
	if spec.Rate > 0 {
		return nil, configErrorf("an open loop (rate %v) runs with clients as goroutines", spec.Rate)
	}
	hosts := r.Hosts.Clients()
	if len(hosts) == 0 {
		return nil, configErrorf("the inventory has no host with the clients role")
	}
	declared, err := c.Backend.declared(spec.TTL, cfg.Params)
	if err != nil {
		return nil, err
	}
	record := r.record(c, spec)
	record.Contract = resultsContract(declared, spec.TTL) // for a judge that records the case itself
	info, err := r.Judge.Open(ctx, r.host, judge.CaseSpec{ID: id, Name: c.String(), Guards: c.Guards, Processes: spec.Clients,
		Duration: spec.Duration, TimelineStep: spec.TimelineStep, Record: &record,
		Contract: judgeContract(declared, spec.TTL)})
	if err != nil {
		return nil, err
	}
	spec.KeyPrefix = info.KeyPrefix
	// The nemesis is the judge's peer, wherever the judge runs: its
	// connections to a judge on a host last until the case is over.
	pctx, endPeer := r.Hosts.untilJudgeLost(ctx)
	defer endPeer()
	peer, err := r.Judge.Peer(pctx, info)
	if err != nil {
		for i := range spec.Clients {
			r.Judge.Gone(id, info.FirstProcess+i, "the nemesis could not join the judge")
		}
		return nil, fmt.Errorf("the nemesis of case %s: %w", id, err)
	}
	n.Attach(ctx, peer, spec.Duration)
	one := spec
	one.Clients, one.MaxOps = 1, (spec.MaxOps+int64(spec.Clients)-1)/int64(spec.Clients)

	workers := make([]*hostWorker, spec.Clients)
	errs := make([]error, spec.Clients)
	var wg sync.WaitGroup
	for i := range workers {
		h := hosts[i%len(hosts)]
		process := info.FirstProcess + i
		wg.Go(func() {
			w, err := r.startHostWorker(ctx, h, id, worker.Assignment{Case: id, Host: r.host, Process: process, Backend: c.Backend.Name,
				Config: cfg, Spec: one})
			if err != nil {
				errs[i] = err
				r.Judge.Gone(id, process, err.Error())
				return
			}
			workers[i] = w
			n.AddClient(process, w.proc)
		})
	}
	wg.Wait()

	stopOnCancel := context.AfterFunc(ctx, func() { r.Judge.Stop(id) })
	watchErr := r.watchHostWorkers(ctx, id, workers, worker.Grace(spec))
	stopOnCancel()
	rec := n.Stop()
	res, err := r.Judge.Finish(pctx, r.host, id)
	if err != nil {
		return nil, errors.Join(err, context.Cause(pctx), watchErr, errors.Join(errs...))
	}
	o := &workloads.Outcome{ClientsAs: results.ClientsProcesses, Result: res}
	o.Declared = declared
	if m := res.All.Info; m != nil {
		o.Info = *m
	}
	r.adopt(o, c, rec)
	if rp, ok := peer.(*judge.RemotePeer); ok && rp.Err() != nil {
		o.Notes = append(o.Notes, "the nemesis lost its view of the judge: "+rp.Err().Error())
	}
	if err := r.Hosts.fetchHistory(context.WithoutCancel(ctx), res, r.Dir); err != nil {
		o.Notes = append(o.Notes, err.Error())
	}
	o.Notes = append(o.Notes, placement(workers))
	if err := errors.Join(watchErr, errors.Join(errs...)); err != nil {
		o.Notes = append(o.Notes, err.Error())
	}
	r.keepWorkerLogs(context.WithoutCancel(ctx), id, workers)
	if ctx.Err() != nil {
		return o, context.Cause(ctx)
	}
	return o, nil
}

// startHostWorker writes a's assignment to h and starts its worker there,
// with the run's token in its environment (never in a file or a command
// line).
func (r *Runner) startHostWorker(ctx context.Context, h *Host, id string, a worker.Assignment) (*hostWorker, error) {
	a.Judge = r.Judge.Addr() // a judge on a host: where every host reaches it
	if r.local != nil {
		judgeAddr, err := h.JudgeAddr(r.Judge.Addr())
		if err != nil {
			return nil, err
		}
		a.Judge = judgeAddr
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	base := path.Join(h.workersDir(), r.Judge.RunID(), fmt.Sprintf("%s-%d", id, a.Process))
	if err := remote.Upload(ctx, h.SSH, bytes.NewReader(b), base+".json", 0o600); err != nil {
		return nil, fmt.Errorf("worker %d on %s: %w", a.Process, h.Name, err)
	}
	d := remote.Daemon{Path: h.Binary, Args: []string{"worker", "--assignment", base + ".json"}, Pidfile: base + ".pid", Log: base + ".log"}
	if r.JudgeToken != "" {
		d.Env = []string{worker.TokenEnv + "=" + r.JudgeToken}
	}
	p, err := remote.Start(ctx, h.SSH, d)
	if err != nil {
		return nil, fmt.Errorf("worker %d on %s: %w", a.Process, h.Name, err)
	}
	return &hostWorker{process: a.Process, host: h, proc: p, log: d.Log}, nil
}

// watchHostWorkers waits until every worker has gone, looking at each
// host's workers with one command every half second, and tells the judge
// of each one gone (which it ignores for those that said Done). Past
// grace, it kills those left — at once when run ends for a lost host
// (Hosts.Watch): the judge may be out of reach and unable to stop them,
// and a run that lost a host tears down what it still reaches.
func (r *Runner) watchHostWorkers(run context.Context, id string, workers []*hostWorker, grace time.Duration) error {
	ctx := context.WithoutCancel(run)
	byHost := map[*Host][]*hostWorker{}
	for _, w := range workers {
		if w != nil {
			byHost[w.host] = append(byHost[w.host], w)
		}
	}
	deadline := time.Now().Add(grace)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var errs []error
	for len(byHost) > 0 {
		for h, ws := range byHost {
			pidfiles := make([]string, len(ws))
			for i, w := range ws {
				pidfiles[i] = w.proc.Pidfile
			}
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			alive, err := remote.Alive(lctx, h.SSH, pidfiles...)
			cancel()
			if err != nil {
				// The host is out of reach: its workers are lost to us.
				errs = append(errs, fmt.Errorf("workers on %s: %w", h.Name, err))
				for _, w := range ws {
					r.Judge.Gone(id, w.process, err.Error())
				}
				delete(byHost, h)
				continue
			}
			var left []*hostWorker
			for i, w := range ws {
				if alive[i] {
					left = append(left, w)
					continue
				}
				r.Judge.Gone(id, w.process, "worker process exited: "+strings.TrimSpace(w.tail(ctx, 1024)))
			}
			if len(left) == 0 {
				delete(byHost, h)
			} else {
				byHost[h] = left
			}
		}
		if len(byHost) == 0 {
			break
		}
		why := "stuck past its case"
		if run.Err() != nil && !errors.Is(context.Cause(run), context.Canceled) {
			deadline, why = time.Now(), "the run lost a host" // no waiting for the workers' end
		}
		if !time.Now().Before(deadline) {
			for h, ws := range byHost {
				for _, w := range ws {
					kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					err := w.proc.Kill(kctx)
					cancel()
					r.Judge.Gone(id, w.process, "worker "+why+": killed")
					errs = append(errs, fmt.Errorf("worker %d on %s %s: killed (%v)", w.process, h.Name, why, err))
				}
			}
			break
		}
		<-tick.C
	}
	return errors.Join(errs...)
}

// tail is the end of w's log.
func (w *hostWorker) tail(ctx context.Context, n int) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := remote.Output(ctx, w.host.SSH, "tail", "-c", strconv.Itoa(n), "--", w.log)
	return string(out)
}

// keepWorkerLogs brings back the logs of the workers that wrote
// something (an error, mostly) into the run dir's workers dir.
func (r *Runner) keepWorkerLogs(ctx context.Context, id string, workers []*hostWorker) {
	if r.Dir == "" {
		return
	}
	for _, w := range workers {
		if w == nil {
			continue
		}
		if t := w.tail(ctx, 64<<10); t != "" {
			dir := filepath.Join(r.Dir, "workers")
			if os.MkdirAll(dir, 0o755) == nil {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-%s.log", id, w.process, w.host.Name)), []byte(t), 0o644)
			}
		}
	}
}

// placement says which host ran which client process.
func placement(workers []*hostWorker) string {
	by := map[string][]string{}
	var order []string
	for _, w := range workers {
		if w == nil {
			continue
		}
		if _, ok := by[w.host.Name]; !ok {
			order = append(order, w.host.Name)
		}
		by[w.host.Name] = append(by[w.host.Name], strconv.Itoa(w.process))
	}
	parts := make([]string, len(order))
	for i, h := range order {
		parts[i] = fmt.Sprintf("%s ran processes %s", h, strings.Join(by[h], ", "))
	}
	return "client hosts: " + strings.Join(parts, "; ")
}
