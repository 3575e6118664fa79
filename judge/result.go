package judge

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/lockbench/lockbench/history"
)

// Result is a case's outcome as the judge saw it.
type Result struct {
	CaseInfo
	// Start is the start barrier, on the judge's wall clock.
	Start time.Time `json:"start"`
	// Elapsed is the measured duration: from the start until the clients
	// stopped (the duration, or an early stop).
	Elapsed time.Duration `json:"elapsed"`
	// Duration is how long the clients were to run; Elapsed is shorter
	// when the case was stopped early.
	Duration time.Duration `json:"duration"`
	// Stopped is set when the case was stopped early or cancelled, with
	// why.
	Stopped string `json:"stopped,omitempty"`
	// Dead lists the clients that died, with how.
	Dead []string `json:"dead,omitempty"`
	// Reports are the overlap counter's, one per guard (the overlaps and
	// incidents are the same in each; stale writes and lost updates are
	// what each guard let through). Linearizable and LinearizableFenced
	// are porcupine's.
	Reports            map[Guard]history.Report `json:"reports"`
	Linearizable       history.Verdict          `json:"linearizable"`
	LinearizableFenced history.Verdict          `json:"linearizable_fenced"`
	// TimelineStep and Timeline count grants per step from the start.
	TimelineStep time.Duration `json:"timeline_step"`
	Timeline     []int64       `json:"timeline"`
	// History is the path of the history file relative to the judge's
	// run dir ("" when the judge keeps none, or could not write it).
	History string `json:"history,omitempty"`
	// Unrecorded says what the judge could not record of the case, and
	// why: its history file, its place in the joined results
	// (Options.Finished). The verdicts stand; the record is incomplete.
	Unrecorded []string `json:"unrecorded,omitempty"`
	// Ops is the history itself; only an in-process runner gets it.
	Ops []history.Op `json:"-"`
	// Metrics merges the metrics of the asking host's clients; All, of
	// every host's.
	Metrics Metrics `json:"metrics"`
	All     Metrics `json:"all"`
	// Processes is the number of clients of every host.
	Processes int `json:"processes"`
	// Injections are what the case's nemesis did, as it told the judge
	// (Peer.Injected) before the first Finish; nil when it told nothing.
	Injections *Injections `json:"injections,omitempty"`
	// Departures are the grants and extensions whose reported promise
	// differs from the backend's declared one (CaseSpec.Contract), which
	// the reports judged them by instead; zero without a declaration.
	Departures history.Departures `json:"departures,omitzero"`
}

func (c *Case) finish(ctx context.Context, host string) (*Result, error) {
	ctx, stop := c.j.bind(ctx)
	defer stop()
	select {
	case <-c.finished:
	case <-ctx.Done():
		c.Stop()
		return nil, fmt.Errorf("case %s: waiting for its clients: %w", c.spec.ID, ended(ctx))
	}
	c.mu.Lock()
	h := c.hosts[host]
	cancelled := c.cancelErr != nil && c.start.IsZero()
	err := c.cancelErr
	c.mu.Unlock()
	if h == nil {
		return nil, protocolf("case %s: host %q did not open it", c.spec.ID, host)
	}
	if cancelled {
		return nil, err
	}
	c.checkOnce.Do(c.check)
	r := *c.result
	r.Metrics = mergeMetrics(h.metrics)
	r.Timeline = timeline(r.Ops, host, c.spec.TimelineStep, r.Elapsed)
	c.collect()
	return &r, nil
}

// collect forgets the case, history and all, once every host has taken
// its result: a run of hundreds of cases would otherwise hold every
// history in memory.
func (c *Case) collect() {
	c.mu.Lock()
	c.collected++
	done := c.collected == len(c.hosts)
	c.mu.Unlock()
	if done {
		c.j.mu.Lock()
		if c.j.cases[c.spec.ID] == c {
			delete(c.j.cases, c.spec.ID)
		}
		c.j.mu.Unlock()
	}
}

// check judges the history, once, and writes it out.
func (c *Case) check() {
	c.mu.Lock()
	ops := slices.Clone(c.ops)
	r := &Result{
		CaseInfo: CaseInfo{RunID: c.j.opts.RunID, ID: c.spec.ID, KeyPrefix: c.keyPrefix},
		Start:    c.start, Duration: c.spec.Duration, Processes: c.expected, TimelineStep: c.spec.TimelineStep, Ops: ops,
		Injections: c.injections,
	}
	end := c.start.Add(c.spec.Duration)
	if !c.stopAt.IsZero() && c.stopAt.Before(end) {
		end = c.stopAt
		if !c.enough {
			r.Stopped = "stopped early"
		}
		if c.cancelErr != nil {
			r.Stopped = c.cancelErr.Error()
		}
	}
	if c.endAt.Before(end) {
		end = c.endAt
	}
	r.Elapsed = end.Sub(c.start)
	var all []Metrics
	for _, name := range c.hostOrder {
		all = append(all, c.hosts[name].metrics...)
	}
	for _, o := range ops {
		if o.F == history.End && o.Type == history.Info {
			r.Dead = append(r.Dead, fmt.Sprintf("process %d at %s: %s", o.Process, time.Duration(o.Complete).Round(time.Millisecond), o.Error))
		}
	}
	c.mu.Unlock()

	r.All = mergeMetrics(all)
	r.Reports = make(map[Guard]history.Report, len(c.spec.Guards))
	judged := ops
	if c.spec.Contract != nil {
		judged, r.Departures = c.spec.Contract.Impose(ops)
	}
	for _, g := range c.spec.Guards {
		r.Reports[g] = history.Check(judged, string(g), g.Fenced())
	}
	r.Linearizable = history.Linearizable(ops, c.j.opts.CheckTimeout)
	r.LinearizableFenced = history.LinearizableFenced(ops, c.j.opts.CheckTimeout)
	r.Timeline = timeline(ops, "", c.spec.TimelineStep, r.Elapsed)
	if in := c.injections; in != nil {
		// The injections join the history, so that their tested flags can
		// be verified from the files alone.
		ops = append(ops, history.Injects(in.Targets, in.Windows, len(ops))...)
		r.Ops = ops
	}
	if c.j.opts.Out != "" {
		rel := filepath.Join("history", c.spec.ID+".jsonl.gz")
		if err := history.WriteFile(filepath.Join(c.j.opts.Out, rel), ops); err != nil {
			r.Unrecorded = append(r.Unrecorded, "history not written: "+err.Error())
		} else {
			r.History = rel
		}
	}
	if f := c.j.opts.Finished; f != nil {
		all := *r
		all.Metrics = all.All
		if err := f(c.spec, &all); err != nil {
			r.Unrecorded = append(r.Unrecorded, "not in the judge's joined results: "+err.Error())
		}
	}
	c.result = r
}

// timeline counts the grants of host's clients (every host's when host
// is empty) per step, covering at least elapsed.
func timeline(ops []history.Op, host string, step, elapsed time.Duration) []int64 {
	n := int((elapsed + step - 1) / step)
	t := make([]int64, n)
	for _, o := range ops {
		if o.F != history.Acquire || o.Type != history.OK || (host != "" && o.Host != host) {
			continue
		}
		i := int(time.Duration(o.Complete) / step)
		if i >= len(t) {
			t = append(t, make([]int64, i+1-len(t))...)
		}
		t[i]++
	}
	return t
}
