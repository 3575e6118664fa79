// Package bench runs lockbench's case matrix: for each case it sets up
// the servers its backend needs (compose, or the user's endpoints), opens
// one Locker per client, runs the workload with the case's fault, and
// records the result; it writes results.json after every case, so an
// interrupted run keeps what it measured.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
	"github.com/lockbench/lockbench/workloads/nemesis"
)

// Case is one combination to measure.
type Case struct {
	Backend Backend
	Fault   *nemesis.Scenario
	Guard   workloads.Guard
	Trial   int
	// Spec is the load: workload, clients, keys, TTL, duration, hold and
	// think times. Run raises the TTL to the fault's MinTTL.
	Spec workloads.Spec
}

// String names the case for progress lines.
func (c Case) String() string {
	return fmt.Sprintf("%s %s/%s guard=%s clients=%d trial=%d", c.Backend.Spec, c.Spec.Workload, c.Fault.Name, c.Guard, c.Spec.Clients, c.Trial)
}

// Event tells a progress display what happened to a case: it started
// (Result and Skipped nil), it was measured (Result set), or it was
// skipped (Skipped says why).
type Event struct {
	Index, Total int
	Case         Case
	Result       *results.Case
	Skipped      error
}

// Runner runs cases against its clusters and accumulates their results.
type Runner struct {
	// Clusters provides the servers.
	Clusters *Clusters
	// Out is where results.json is written after every case ("" to keep
	// the results in memory only).
	Out string
	// Progress, if set, is called when each case starts and ends.
	Progress func(Event)
	// File holds the results so far; Run fills in its metadata.
	File results.File
}

// Run measures every case in order. It stops early when ctx ends,
// marking the results partial; a case that fails (its servers would not
// start, its backend would not open) is reported and skipped, not fatal.
// It returns the results and ctx's error if the run was cut short.
func (r *Runner) Run(ctx context.Context, cases []Case) (*results.File, error) {
	host, _ := os.Hostname()
	r.File.Started = time.Now()
	r.File.Hosts = []string{host}
	r.File.Machine = fmt.Sprintf("%d cores, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	for i, c := range cases {
		if ctx.Err() != nil {
			break
		}
		r.emit(Event{Index: i, Total: len(cases), Case: c})
		res, err := r.one(ctx, i, c, host)
		switch {
		case res != nil:
			r.File.Cases = append(r.File.Cases, *res)
		case err == nil:
			err = errors.New("no result")
		}
		r.emit(Event{Index: i, Total: len(cases), Case: c, Result: res, Skipped: errIfNil(res, err)})
		if err := r.save(ctx.Err() != nil); err != nil {
			return &r.File, err
		}
	}
	r.File.Finished = time.Now()
	if err := ctx.Err(); err != nil {
		r.File.Partial = true
		return &r.File, errors.Join(err, r.save(true))
	}
	return &r.File, r.save(false)
}

func errIfNil(res *results.Case, err error) error {
	if res != nil {
		return nil
	}
	return err
}

func (r *Runner) emit(e Event) {
	if r.Progress != nil {
		r.Progress(e)
	}
}

func (r *Runner) save(partial bool) error {
	if r.Out == "" {
		return nil
	}
	r.File.Partial = partial
	r.File.Finished = time.Now()
	return results.Write(r.Out, &r.File)
}

// one measures case c, or returns why it could not.
func (r *Runner) one(ctx context.Context, i int, c Case, host string) (*results.Case, error) {
	target, cfg, err := r.Clusters.Setup(ctx, c.Backend, c.Fault)
	if err != nil {
		return nil, fmt.Errorf("servers for %s: %w", c.Backend.Spec, err)
	}
	if err := c.Fault.Applies(target); err != nil {
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = Repair(rctx, target)
	}()

	spec := c.Spec
	spec.TTL = max(spec.TTL, c.Fault.MinTTL)
	spec.KeyPrefix = fmt.Sprintf("lockbench:%d:%d:", time.Now().Unix(), i)
	spec, err = spec.Normalize()
	if err != nil {
		return nil, err
	}
	if c.Backend.Name == "redlock" {
		if _, set := cfg.Params["maxttl"]; !set {
			// A node that lost its data sits out the largest max TTL its
			// clients recorded: the case's TTL, unless an earlier case on
			// these nodes took longer leases (nodes restarted by a fault
			// are replaced before the next case; see Clusters.Setup).
			cfg.Params["maxttl"] = spec.TTL.String()
		}
	}
	lockers, err := open(c.Backend.Name, cfg, spec.Clients)
	if err != nil {
		return nil, err
	}
	defer closeAll(lockers)
	res, err := workloads.NewResource(c.Guard)
	if err != nil {
		return nil, err
	}
	out, runErr := workloads.Run(ctx, spec, lockers, res, c.Fault.Hooks(target, spec))
	if out == nil {
		return nil, runErr
	}
	rc := &results.Case{Backend: c.Backend.Spec, Fault: c.Fault.Name, Trial: c.Trial, Host: host}
	if err := out.Fill(rc); err != nil {
		return nil, err
	}
	if runErr != nil {
		rc.Notes = append(rc.Notes, "run cut short: "+runErr.Error())
	}
	return rc, nil
}

// open opens one Locker per client, as separate processes would have.
func open(name string, cfg backends.Config, clients int) ([]locker.Locker, error) {
	lockers := make([]locker.Locker, 0, clients)
	for range clients {
		l, err := backends.Open(name, cfg)
		if err != nil {
			closeAll(lockers)
			return nil, err
		}
		lockers = append(lockers, l)
	}
	return lockers, nil
}

func closeAll(lockers []locker.Locker) {
	for _, l := range lockers {
		_ = l.Close()
	}
}
