// Package bench runs lockbench's case matrix: for each case it sets up
// the servers its backend needs (compose, or the user's endpoints), opens
// a case on the judge, runs the clients — goroutines of this process for
// throughput cases, one worker process each for fault and safety cases —
// with the case's fault injected on a seeded schedule, and records the
// judged result; it writes results.json every 30 s and on the way out,
// so an interrupted run keeps what it measured.
package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/worker"
	"github.com/lockbench/lockbench/workloads"
)

// Case is one combination to measure.
type Case struct {
	Backend Backend
	Fault   nemesis.Fault
	// Guards are the resource guards the case is judged under, side by
	// side in one run; it yields a result per guard.
	Guards []judge.Guard
	Trial  int
	// ClientsAs is results.ClientsProcesses (a worker process per
	// client) or results.ClientsGoroutines; faults that stop clients need
	// processes.
	ClientsAs string
	// Durability is the servers' profile: results.DurabilityFast (also
	// when empty), DurabilityPeriodic or DurabilityDurable.
	Durability string
	// Injections is how many times the fault strikes in the case.
	Injections int
	// Spec is the load: workload, clients, keys, TTL, duration, hold and
	// think times. Run raises the TTL to the fault's MinTTL and the
	// duration to its MinDuration on the case's cluster.
	Spec workloads.Spec
	// Fresh starts the case's servers anew for its trial, so that its
	// trials are independent samples (results.Case.FreshServers): the
	// first case of a backend's trial retires the servers an earlier
	// case ran on, and the next cases of the same backend and trial
	// share the new ones. Servers the runner does not start (a backend's
	// endpoints, an inventory's hosts) are never fresh.
	Fresh bool
}

// String names the case for progress lines.
func (c Case) String() string {
	return fmt.Sprintf("%s %s/%s guards=%v clients=%d×%s %s trial=%d", c.Backend.Spec, c.Spec.Workload, c.Fault.Spec, c.Guards,
		c.Spec.Clients, c.ClientsAs, c.Durability, c.Trial)
}

// Event tells a progress display what happened to a case: it started
// (Results and Skipped nil), it was measured (Results holds one result
// per guard), or it was skipped (Skipped says why).
type Event struct {
	Index, Total int
	Case         Case
	Results      []results.Case
	Skipped      error
}

// Runner runs cases against its clusters and accumulates their results.
type Runner struct {
	// Clusters provides the servers.
	Clusters *Clusters
	// Dir is the run dir: results.json and the histories go there ("" to
	// keep the results in memory only).
	Dir string
	// Judge referees the cases; nil starts one in this process, listening
	// on loopback for the worker processes. A judge in another process
	// (judge.DialRemote) joins this host to a run of several hosts: every
	// case then runs its clients as processes, and without faults.
	Judge judge.Referee
	// Hosts, when set, runs the clients on the client hosts of an
	// inventory, as worker processes started there over SSH, against
	// the judge Hosts.StartJudge started on the judge's host (set Judge
	// and JudgeToken to it) or else this runner's, which then listens
	// beyond loopback with a run token of its own (the servers go where
	// Clusters.OnHosts puts them).
	Hosts *Hosts
	// Log, when set, is told what the judge refuses (a stranger without
	// the run token).
	Log io.Writer
	// JudgeToken is the run's judge token (judge.Options.Token) when the
	// judge asks for one: the worker processes get it in their
	// environment.
	JudgeToken string
	// Worker starts a client process (worker.Default when zero).
	Worker worker.Command
	// Seed is the run's seed: keys, hold times, fault targets and times
	// derive from it (random when 0; the file records it).
	Seed uint64
	// Host names this runner on the judge and in the results (the
	// hostname when empty); the hosts of one run need distinct names.
	Host string
	// StartBy, when set, is the time after which Run starts no case: the
	// cases left are recorded cut (ErrStartBy), and Run returns without
	// an error. lockbench advise gives round 1 its share of the budget so.
	StartBy time.Time
	// Progress, if set, is called when each case starts and ends.
	Progress func(Event)
	// File holds the results so far; Run fills in its metadata.
	File results.File

	host  string
	local *judge.Judge
	// done counts the cases of earlier calls of Run: a later call's
	// cases continue their ids and seeds, into the same File.
	done int
	// fresh is the backend spec and trial whose servers the last Fresh
	// case started.
	fresh string
	// saved is when results.json was last written (see saveEvery).
	saved time.Time
}

// saveEvery is how often, at most, a run rewrites its results.json while
// it goes on: the file is rewritten whole (2 MB by the end of make
// bench), and rewriting it after each of 209 cases cost about 10 s of
// the run's 15 minutes. An interrupted run still leaves a partial file
// (written on the way out), and a crashed one loses at most this much.
const saveEvery = 30 * time.Second

// Run measures every case in order. It stops early when ctx ends,
// marking the results partial; a case that fails (its servers would not
// start, its backend would not open) is reported and skipped, not fatal.
// It returns the results and ctx's error if the run was cut short.
//
// A later call of Run adds its cases to the same File (the rounds of
// lockbench advise): same run id and seed, case ids and seeds that
// continue the earlier calls'.
func (r *Runner) Run(ctx context.Context, cases []Case) (*results.File, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	if r.local != nil {
		defer func() {
			_ = r.local.Close()
			r.Judge, r.local = nil, nil
		}()
	}
	if r.File.Started.IsZero() {
		r.File.Started = time.Now()
	}
	r.File.Hosts = []string{r.host}
	r.File.RunID = r.Judge.RunID()
	r.File.Seed = r.Seed
	r.File.Cores = runtime.NumCPU()
	r.File.MemoryBytes = memory()
	r.File.Machine = fmt.Sprintf("%d cores, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	base := r.done
	r.done += len(cases)
	for i, c := range cases {
		if ctx.Err() != nil {
			r.cut(cases[i:], ctx.Err())
			break
		}
		if !r.StartBy.IsZero() && !time.Now().Before(r.StartBy) {
			r.cut(cases[i:], ErrStartBy)
			break
		}
		r.emit(Event{Index: i, Total: len(cases), Case: c})
		res, err := r.one(ctx, base+i, c)
		switch {
		case len(res) > 0:
			r.File.Cases = append(r.File.Cases, res...)
			err = nil
		case err == nil:
			err = errors.New("no result")
		}
		switch {
		case err != nil && ctx.Err() != nil:
			r.cut(cases[i:i+1], ctx.Err())
		case err != nil:
			r.skip(c, err)
		}
		r.emit(Event{Index: i, Total: len(cases), Case: c, Results: res, Skipped: err})
		if time.Since(r.saved) < saveEvery && ctx.Err() == nil {
			continue
		}
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

// init sets the defaults: host name, seed, worker command, judge.
func (r *Runner) init() error {
	r.host = r.Host
	if r.host == "" {
		r.host, _ = os.Hostname()
	}
	if r.host == "" {
		r.host = localHost
	}
	if r.Seed == 0 {
		r.Seed = rand.Uint64() | 1
	}
	if r.Worker.Path == "" {
		w, err := worker.Default()
		if err != nil {
			return err
		}
		r.Worker = w
	}
	if r.Judge != nil {
		return nil
	}
	listen := "127.0.0.1:0"
	if r.Hosts != nil {
		// The client hosts reach it at this machine's address: beyond
		// loopback, only with the run's token, which the runner makes
		// and hands its workers in their environment.
		tok := make([]byte, 32)
		_, _ = crand.Read(tok)
		r.JudgeToken, listen = hex.EncodeToString(tok), ":0"
	}
	// A later call of Run keeps the run's id (its keys' prefix).
	j, err := judge.New(judge.Options{RunID: r.File.RunID, Out: r.Dir, Token: r.JudgeToken, Log: r.Log})
	if err != nil {
		return err
	}
	if err := j.Listen(listen); err != nil {
		return err
	}
	r.Judge, r.local = j, j
	return nil
}

// skip records in the results that case c could not run, once per
// backend and fault class.
func (r *Runner) skip(c Case, err error) {
	for _, s := range r.File.Skipped {
		if s.Backend == c.Backend.Spec && s.FaultClass == c.Fault.Class() {
			return
		}
	}
	r.File.Skipped = append(r.File.Skipped, results.Skip{Backend: c.Backend.Spec, FaultClass: c.Fault.Class(), Reason: err.Error()})
}

// cut records in the results the cases the run stopped before (cause:
// the context's error, or ErrStartBy), once per backend and fault spec:
// they applied and were planned, so what they would have shown is
// unknown.
func (r *Runner) cut(cases []Case, cause error) {
	why := "the run was interrupted before it ran"
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		why = "the run's time ran out before it ran"
	case errors.Is(cause, ErrStartBy):
		why = "its round's share of the time ran out before it ran; a later round runs it if the answer needs it"
	}
	for _, c := range cases {
		if slices.ContainsFunc(r.File.Skipped, func(s results.Skip) bool {
			return s.Cut && s.Backend == c.Backend.Spec && s.Fault == c.Fault.Spec
		}) {
			continue
		}
		r.File.Skipped = append(r.File.Skipped, results.Skip{Backend: c.Backend.Spec, FaultClass: c.Fault.Class(), Fault: c.Fault.Spec,
			Cut: true, ServerKind: string(c.Backend.Descriptor.Servers.Kind), Reason: fmt.Sprintf("not run: %s (%s)", why, c)})
	}
}

func (r *Runner) emit(e Event) {
	if r.Progress != nil {
		r.Progress(e)
	}
}

func (r *Runner) save(partial bool) error {
	if r.Dir == "" {
		return nil
	}
	r.File.Partial = partial
	r.File.Finished = time.Now()
	r.saved = r.File.Finished
	return results.Write(filepath.Join(r.Dir, "results.json"), &r.File)
}

// caseSeed derives case i's seed from the run's.
func (r *Runner) caseSeed(i int) uint64 {
	return rand.New(rand.NewPCG(r.Seed, uint64(i))).Uint64() | 1
}

// one measures case c, one result per guard, or returns why it could
// not.
func (r *Runner) one(ctx context.Context, i int, c Case) ([]results.Case, error) {
	if err := c.Fault.Fits(Shape(c.Backend)); err != nil {
		return nil, notApplicable{inapplicable(err)}
	}
	if reason := profileFits(c.Backend, c.Durability); reason != "" {
		return nil, notApplicable{reason}
	}
	spec := c.Spec
	spec.TTL = max(spec.TTL, c.Fault.MinTTL)
	fresh := r.renew(c)
	target, cfg, err := r.Clusters.Setup(ctx, c.Backend, c.Fault, c.Durability, spec.TTL)
	if err != nil {
		return nil, serversError{fmt.Errorf("servers for %s: %w", c.Backend.Spec, err)}
	}
	if err := c.Fault.Applies(target); err != nil {
		if r.Clusters.External(c.Backend.Name) {
			return nil, fmt.Errorf("%w (on external servers lockbench cannot break)", err)
		}
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = r.Clusters.Repair(rctx, target)
	}()

	spec.Duration = max(spec.Duration, c.Fault.MinDuration(target.Shape(), Lease(c.Backend, spec.TTL), c.Injections))
	spec.Seed = r.caseSeed(i)
	spec, err = spec.Normalize()
	if err != nil {
		return nil, asConfig(err)
	}
	// The settings a lease length rests on besides the TTL (Redlock's max
	// TTL, ZooKeeper's session), for this case's TTL.
	cfg.Params = c.Backend.Descriptor.ParamsFor(spec.TTL, cfg.Params)
	n := c.Fault.Nemesis(nemesis.Env{
		Target: target, Spec: spec, Lease: Lease(c.Backend, spec.TTL), KeyLife: KeyLife(c.Backend, spec.TTL),
		Injections: c.Injections, Rand: rand.New(rand.NewPCG(spec.Seed, 0xfa17)),
	})
	// A fault on a schedule may need longer than planned to get its tested
	// injections: the case may run that long, and ends when it has them.
	spec.Duration = n.Duration()
	id := fmt.Sprintf("%03d", i)
	var out *workloads.Outcome
	var runErr error
	switch {
	case r.Hosts != nil:
		if r.local == nil && r.Hosts.judge == nil {
			return nil, configErrorf("a run over an inventory's hosts refers its clients to its own judge, or the one it started on a host")
		}
		out, runErr = r.hostProcesses(ctx, id, c, spec, cfg, n)
	case c.ClientsAs == results.ClientsGoroutines && r.local != nil:
		out, runErr = r.goroutines(ctx, id, c, spec, cfg, n)
	default:
		if r.local == nil && c.Fault.Name != "none" {
			return nil, configErrorf("fault %s: faults need this host's own judge (run without --judge)", c.Fault.Spec)
		}
		out, runErr = r.processes(ctx, id, c, spec, cfg, n, target.Nodes)
	}
	if out == nil {
		return nil, runErr
	}
	if c.Fault.Note != "" {
		out.Notes = append(out.Notes, c.Fault.Note)
	}

	if runErr != nil {
		out.Notes = append(out.Notes, "run cut short: "+runErr.Error())
	}
	base := r.record(c, spec)
	if len(target.Nodes) == 0 {
		base.Durability = "" // no servers: no profile
	}
	base.FreshServers = fresh
	return out.Cases(base, c.Guards)
}

// renew retires, for a Fresh case that starts a backend's trial, the
// servers an earlier case ran on, so that Setup starts new ones, and
// reports whether the case runs on servers started for its trial alone:
// never on servers the runner does not start (endpoints, hosts), nor
// for a backend without servers (nothing to share).
func (r *Runner) renew(c Case) bool {
	if !c.Fresh || r.Hosts != nil || r.Clusters.External(c.Backend.Name) || c.Backend.Descriptor.Servers.Kind == backends.NoServers {
		r.fresh = "" // whatever it ran on is no longer the trial's alone
		return false
	}
	key := fmt.Sprintf("%s\x00%d", c.Backend.Spec, c.Trial)
	if r.fresh != key {
		r.Clusters.Lost(c.Backend)
		r.fresh = key
	}
	return true
}

// record is what a case's results say of it before it is measured: the
// case, and the load as it runs.
func (r *Runner) record(c Case, spec workloads.Spec) results.Case {
	rc := results.Case{
		Backend: c.Backend.Spec, Fault: c.Fault.Spec, FaultClass: c.Fault.Class(), Trial: c.Trial, Host: r.host,
		Durability: c.Durability, Seed: spec.Seed, Control: c.Backend.Descriptor.Control,
		ServerKind: string(c.Backend.Descriptor.Servers.Kind),
	}
	spec.Describe(&rc)
	return rc
}
