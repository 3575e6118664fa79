package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/worker"
	"github.com/lockbench/lockbench/workloads"
)

// processes runs case c with a worker process per client, with nemesis
// n beside them when the judge is this host's.
// A fault that cuts clients one by one (SplitNets) gets each worker in a
// network namespace of its own on the peer network of nodes.
func (r *Runner) processes(ctx context.Context, id string, c Case, spec workloads.Spec, cfg backends.Config, n *nemesis.Nemesis,
	nodes []nemesis.Node) (*workloads.Outcome, error) {
	if spec.Rate > 0 {
		return nil, configErrorf("an open loop (rate %v) runs with clients as goroutines", spec.Rate)
	}
	declared, err := c.Backend.declared(spec.TTL, cfg.Params)
	if err != nil {
		return nil, err
	}
	judgeAddr := r.Judge.Addr()
	var split *splitClients
	if c.Fault.SplitNets {
		servers, err := kinds.ComposeNodes(nodes)
		if err != nil {
			return nil, fmt.Errorf("fault %s: %w", c.Fault.Spec, err)
		}
		if split, err = newSplitClients(servers, judgeAddr); err != nil {
			return nil, fmt.Errorf("fault %s: %w", c.Fault.Spec, err)
		}
		defer split.Close()
		judgeAddr = split.JudgeAddr()
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
	if r.local != nil {
		n.Attach(ctx, r.local.Case(id), spec.Duration)
	}
	one := spec
	one.Clients, one.MaxOps = 1, (spec.MaxOps+int64(spec.Clients)-1)/int64(spec.Clients)
	workers := make([]*proc, spec.Clients)
	var wg sync.WaitGroup
	for i := range workers {
		start := (*exec.Cmd).Start
		if split != nil {
			start = func(cmd *exec.Cmd) error {
				cn, err := split.start(i, cmd)
				if err == nil {
					n.AddClientNet(info.FirstProcess+i, kinds.ClientNet{Net: cn})
				}
				return err
			}
		}
		w, err := r.startWorker(worker.Assignment{Judge: judgeAddr, Case: id, Host: r.host, Process: info.FirstProcess + i,
			Backend: c.Backend.Name, Config: cfg, Spec: one}, start)
		if err != nil {
			r.Judge.Gone(id, info.FirstProcess+i, err.Error())
			continue
		}
		workers[i] = w
		n.AddProcess(w.process, w.cmd.Process)
		wg.Go(func() {
			if err := w.wait(); err != nil {
				r.Judge.Gone(id, w.process, err.Error())
			}
		})
	}
	exited := make(chan struct{})
	go func() { wg.Wait(); close(exited) }()

	grace := worker.Grace(spec)
	stopOnCancel := context.AfterFunc(ctx, func() { r.Judge.Stop(id) })
	select {
	case <-exited:
	case <-time.After(grace):
		for _, w := range workers {
			if w != nil {
				w.kill()
			}
		}
		<-exited
	}
	stopOnCancel()
	rec := n.Stop()
	res, err := r.Judge.Finish(context.WithoutCancel(ctx), r.host, id)
	if err != nil {
		return nil, errors.Join(err, workersFailed(workers))
	}
	o := &workloads.Outcome{ClientsAs: results.ClientsProcesses, Result: res}
	o.Declared = declared
	if m := res.All.Info; m != nil {
		o.Info = *m
	}
	r.adopt(o, c, rec)
	if err := workersFailed(workers); err != nil {
		o.Notes = append(o.Notes, err.Error())
	}
	if ctx.Err() != nil {
		return o, ctx.Err()
	}
	return o, nil
}

// proc is one client process.
type proc struct {
	process int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	out     *tail
	err     error
}

// startWorker starts a worker with start (cmd.Start, or in a namespace).
func (r *Runner) startWorker(a worker.Assignment, start func(*exec.Cmd) error) (*proc, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.Worker.Path, r.Worker.Args...)
	cmd.Env = append(os.Environ(), r.Worker.Env...)
	if r.JudgeToken != "" {
		cmd.Env = append(cmd.Env, worker.TokenEnv+"="+r.JudgeToken)
	}
	w := &proc{process: a.Process, cmd: cmd, out: &tail{max: 4096}}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	// Its own process group, so that Ctrl-C reaches the runner only,
	// which stops the case in order; and a parent-death signal, so that it
	// dies with the runner however the runner dies (its stdin closing and
	// its judge line breaking stop it too).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := start(cmd); err != nil {
		return nil, fmt.Errorf("worker %d: %w", a.Process, err)
	}
	if _, err := w.stdin.Write(append(b, '\n')); err != nil {
		w.kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("worker %d: assignment: %w", a.Process, err)
	}
	return w, nil
}

// wait reaps the worker; the error says how it failed, with the end of
// its output.
func (w *proc) wait() error {
	err := w.cmd.Wait()
	w.stdin.Close()
	if err != nil {
		w.err = fmt.Errorf("worker process %d: %v: %s", w.process, err, strings.TrimSpace(w.out.String()))
	}
	return w.err
}

// kill resumes and kills the worker's process group.
func (w *proc) kill() {
	if w.cmd.Process != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGCONT)
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func workersFailed(ws []*proc) error {
	var errs []error
	for _, w := range ws {
		if w != nil && w.err != nil {
			errs = append(errs, w.err)
		}
	}
	return errors.Join(errs...)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
