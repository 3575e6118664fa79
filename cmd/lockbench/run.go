package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lockbench/lockbench/answer"
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// runFlags are the flags of `lockbench run`.
type runFlags struct {
	suite      string
	backends   []string
	workloads  []string
	faults     []string
	fencing    bool
	guards     []string
	clients    []int
	clientsAs  string
	durability []string
	injections int
	duration   time.Duration
	trials     int
	ttl        time.Duration
	keys       int
	hold       string
	holdLeft   string
	autoExtend bool
	acquireTO  time.Duration
	think      string
	seed       uint64
	judge      string
	judgeToken string
	host       string
	hosts      hostsFlags
	out        string
	noReport   bool
	dryRun     bool
	keepGoing  bool
	endpoints  endpointFlags
	failOn     []string
	fresh      bool
}

func runCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run cases against real servers and write DIR/results.json (and the report)",
		Long: `run measures every case of a suite (--suite default or quick: what make bench and make
bench-quick run; full: every durability profile on every backend) or of the cross product of the
flags: backends × workloads × faults × clients × trials, each case judged under every --guard at
once. It starts the servers the backends need on 127.0.0.1 (or uses the endpoints you give) and
a judge that every client reports to, runs the clients as worker processes (lockbench worker) or
goroutines, writes DIR/results.json every 30 s and at the end, with each case's history under
DIR/history, and renders the report into DIR. Ctrl-C stops the run, stops every server and
worker and keeps the results measured so far.

A backend is a registered name with optional params: redlock, redlock?quarantine=false,
sentinel?wait=1, redsync?retrydelay=1ms, postgres?mode=advisory. So is a fault: client-pause?x=3,
clock-jump?by=0.5&nodes=minority.

With --judge ADDR the run joins a judge started by lockbench judge, with other hosts running
the same cases at the same time: they share the run's keys, start together, and the judge
counts two holders at once across all of them.

With --inventory hosts.yaml the run spans the inventory's hosts, reached over SSH from this
machine (the control node): each backend's servers start where the inventory puts them (with
pidfiles, as the account they need), the clients run as worker processes on the client hosts
(this static lockbench binary, uploaded there), and the judge runs on the host the inventory
gives the judge role (a lockbench judge daemon; its results.json comes back under DIR/judge,
the histories under DIR/history) or else here, taking reports only from the run's own workers
and nemesis (a run token). The nemesis stays here, as the judge's peer over the wire. Every fault the hosts support is injected there —
server pauses, restarts, crashes, clients cut off by rules on the hosts, clock jumps, client
pauses — and each injection names the nodes it hit (results.json says where each node runs).
Ctrl-C, or a broken link to a host, ends the run and takes everything down on every host it
still reaches; for a host it lost it says what is left there, which the next run clears.

Backends:
` + backendDocs(),
		Example: `  # what make bench runs: every backend, the fault catalogue, the report in results/now
  lockbench run --suite default --out results/now

  # a smoke run of a few minutes
  lockbench run --suite quick --out results/quick

  # only the locks and faults you care about, judged with fencing tokens too
  lockbench run --backend redlock,etcd --fault none,client-pause,restart --fencing --trials 3 --out results/mine

  # your own servers instead of the ones lockbench starts
  lockbench run --backend redis --redis-addrs 10.0.0.5:6379 --fault none --out results/prod-like

  # a run over several hosts, reached over SSH
  lockbench run --suite default --inventory hosts.yaml --out results/hosts`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.suite, "suite", "", "a predefined suite: default (make bench), quick (make bench-quick) or full (make bench-full: every "+
		"durability profile on every backend, every clock fault; about four times the default's load); other flags then override its settings")
	fl.StringSliceVar(&f.backends, "backend", nil, "backends to measure (default: every registered backend)")
	fl.StringSliceVar(&f.workloads, "workload", []string{"hot"}, "workloads: hot, uniform, zipf")
	fl.StringSliceVar(&f.faults, "fault", []string{"none"}, "faults, with params as name?param=value: "+strings.Join(nemesis.Names(), ", "))
	fl.BoolVar(&f.fencing, "fencing", false, "judge the resource with fencing tokens too (adds --guard fence)")
	fl.StringSliceVar(&f.guards, "guard", nil, "resource guards, each case judged under all of them at once: none, fence, fence-rw, cas "+
		"(default none)")
	fl.IntSliceVar(&f.clients, "clients", []int{8}, "concurrent clients, each with its own connections")
	fl.StringVar(&f.clientsAs, "clients-as", "", "run the clients as processes or goroutines (default: goroutines without a fault, "+
		"processes under one)")
	fl.StringSliceVar(&f.durability, "durability", []string{"fast"}, "servers' profiles, each case run under each: fast (no fsync), "+
		"periodic (a sync about once a second; ZooKeeper and etcd have none) or durable (every write synced)")
	fl.IntVar(&f.injections, "injections", 3, "times each fault case injects its fault")
	fl.Uint64Var(&f.seed, "seed", 0, "the run's seed: keys, hold times, fault targets and times (default random; results.json records it)")
	fl.StringVar(&f.judge, "judge", "", "join the judge at this address (lockbench judge) instead of running one")
	fl.StringVar(&f.judgeToken, "judge-token-file", "", "the run token of the judge at --judge (the file lockbench judge --token-file wrote)")
	f.hosts.register(fl)
	fl.StringVar(&f.host, "host", "", "this host's name on the judge (default the hostname)")
	fl.DurationVar(&f.duration, "duration", 5*time.Second, "how long each case runs")
	fl.IntVar(&f.trials, "trials", 1, "repetitions of each case")
	fl.DurationVar(&f.ttl, "ttl", time.Second, "lease TTL (faults raise it where they need longer leases)")
	fl.IntVar(&f.keys, "keys", 100, "keys of the uniform and zipf workloads")
	fl.StringVar(&f.hold, "hold", "1ms", "hold time: 2ms, 1ms-5ms (uniform) or exp:2ms")
	fl.StringVar(&f.holdLeft, "hold-left", "", "hold a random fraction, up to this much (at most 1), of the validity the lease has left, "+
		"instead of --hold: catches a lease that claims more than its lock keeps; or, as a duration (3s), hold that long whatever the "+
		"lease says (with --auto-extend: long holds through server faults)")
	fl.BoolVar(&f.autoExtend, "auto-extend", false, "leases extend themselves (their watchdog, every TTL/3) while their holders hold: give "+
		"a --hold of several TTLs")
	fl.DurationVar(&f.acquireTO, "acquire-timeout", workloads.DefaultAcquireTimeout, "how long each acquire may wait (longer for holds of "+
		"several TTLs)")
	fl.StringVar(&f.think, "think", "0", "think time between sections (same forms as --hold)")
	fl.StringVar(&f.out, "out", "", "output dir for results.json and the report (required, but with --dry-run)")
	fl.BoolVar(&f.noReport, "no-report", false, "write results.json only")
	fl.BoolVar(&f.dryRun, "dry-run", false,
		"list the cases the flags select, and the fault classes a backend is not put through and why; run nothing")
	fl.BoolVar(&f.keepGoing, "keep-going", false, "exit 0 even when some backends' servers would not start and their cases were skipped "+
		"(the end of the run still names them)")
	f.endpoints.register(fl)
	fl.BoolVar(&f.fresh, "fresh-servers", false,
		"start each backend's servers anew for each trial, so that trials are independent samples (results.json: fresh_servers)")
	fl.StringSliceVar(&f.failOn, "fail-on", nil, "exit 3 when the run shows any of: lock-bug (a real backend's lock bug), "+
		"stale-write (a stale write a token-checking resource accepted), undecided (an intent the answer leaves undecided)")
	return cmd
}

func (f *runFlags) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	gates, err := parseGates(f.failOn)
	if err != nil {
		return err
	}
	if f.out == "" && !f.dryRun {
		return errors.New(`required flag(s) "out" not set`)
	}
	cases, skipped, err := f.cases(cmd)
	if err != nil {
		return err
	}
	if f.fresh {
		for i := range cases {
			cases[i].Fresh = true
		}
	}
	if f.dryRun {
		return dryRun(cmd.OutOrStdout(), cases, skipped)
	}
	external, err := f.endpoints.configs()
	if err != nil {
		return err
	}
	if f.hosts.inventory != "" {
		if f.judge != "" || len(external) > 0 {
			return fmt.Errorf("%w: --inventory runs servers, clients and the judge on its hosts (or the judge here): not with --judge or a "+
				"backend's endpoints", bench.ErrConfig)
		}
		for i := range cases {
			cases[i].ClientsAs = results.ClientsProcesses // on the client hosts
		}
	}
	env, err := serverEnv(f.out)
	if err != nil {
		return err
	}
	defer env.Close()

	bar := newBar(cmd.ErrOrStderr(), len(cases))
	var stderr io.Writer = &lockedWriter{w: cmd.ErrOrStderr()}
	fmt.Fprintf(stderr, "lockbench: %d cases; servers under %s\n", len(cases), env.Dir)
	var tick *ticker // without a terminal, a line every progressEvery
	if bar == nil {
		tick = startTicker(stderr, len(cases), progressEvery)
		defer tick.Stop()
	}
	var invalid []error         // cases skipped for bad settings (a backend's params) or refused by the judge
	var unstarted []bench.Event // cases skipped because their servers would not start
	runner := &bench.Runner{
		Clusters: bench.NewClusters(env, external),
		Dir:      f.out,
		Seed:     f.seed,
		Host:     f.host,
		Progress: func(e bench.Event) {
			if errors.Is(e.Skipped, locker.ErrInvalid) || errors.Is(e.Skipped, judge.ErrProtocol) {
				invalid = append(invalid, fmt.Errorf("%s: %w", e.Case, e.Skipped))
			}
			if errors.Is(e.Skipped, bench.ErrServers) && !errors.Is(e.Skipped, context.Canceled) {
				unstarted = append(unstarted, e)
			}
			if tick != nil {
				tick.event(e)
			}
			progress(stderr, bar, e)
		},
	}
	if f.judge != "" {
		var opts []judge.DialOption
		if f.judgeToken != "" {
			tok, err := readToken(f.judgeToken)
			if err != nil {
				return err
			}
			opts, runner.JudgeToken = append(opts, judge.Token(tok)), tok
		}
		remote, err := judge.DialRemote(ctx, f.judge, opts...)
		if err != nil {
			return err
		}
		defer remote.Close()
		runner.Judge = remote
	}
	var hosts *bench.Hosts
	if f.hosts.inventory != "" {
		hosts, err = f.hosts.dial(ctx, stderr)
		if err != nil {
			return err
		}
		// Servers first (env.Close, deferred later, runs earlier), then
		// the workers and cuts, and the links.
		defer func() {
			if err := hosts.Close(); err != nil {
				fmt.Fprintln(stderr, "lockbench: hosts:", err)
			}
		}()
		defer env.Close()
		runner.Hosts, runner.Log = hosts, stderr
		runner.Clusters.OnHosts(hosts)
		var stop context.CancelFunc
		ctx, stop = hosts.Watch(ctx)
		defer stop()
		// The judge where the inventory puts it (else here, in the
		// runner); Close kills it on a way out that skips StopJudge.
		rj, tok, err := hosts.StartJudge(ctx)
		if err != nil {
			return err
		}
		if rj != nil {
			defer rj.Close()
			runner.Judge, runner.JudgeToken = rj, tok
		}
	}
	runner.File.Command = strings.Join(os.Args, " ")
	runner.File.Suite = f.suite
	runner.File.Skipped = skipped
	runner.File.Versions = versions(ctx)
	file, runErr := runner.Run(ctx, cases)
	if err := hosts.StopJudge(ctx, f.out); err != nil {
		fmt.Fprintln(stderr, "lockbench: the judge:", err)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	tick.Stop()
	// Stop every server before rendering: the report needs none of them,
	// and their data goes (but for a server that failed): only the logs
	// stay.
	if err := env.Close(); err != nil {
		fmt.Fprintln(stderr, "lockbench: stopping servers:", err)
	}
	keepHostLogs(env, stderr)
	if kept, err := env.Prune(); err != nil {
		fmt.Fprintln(stderr, "lockbench: removing the servers' data:", err)
	} else if len(kept) > 0 {
		fmt.Fprintf(stderr, "lockbench: kept the data of the servers that failed, under %s: %s\n", env.Dir, strings.Join(kept, ", "))
	}
	var lost error // a host's link that broke
	if errors.Is(runErr, context.Canceled) {
		why := "interrupted"
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			why, lost = cause.Error(), cause
		}
		fmt.Fprintf(stderr, "lockbench: %s, after %d of %d cases; partial results kept\n", why, len(file.Cases), len(cases))
	} else if runErr != nil {
		return runErr
	}
	ro := &report.Options{}
	if f.noReport {
		ro = nil
	}
	if err := finish(cmd.OutOrStdout(), f.out, file, ro); err != nil {
		return err
	}
	if lost != nil {
		return lost
	}
	if len(invalid) > 0 {
		return fmt.Errorf("%d of %d cases not run: %w", len(invalid), len(cases), errors.Join(invalid...))
	}
	if err := unstartedError(stderr, unstarted, len(cases), f.keepGoing); err != nil {
		return err
	}
	return failOn(gates, file, "", undecidedRun(file))
}

// undecidedRun says which intent the decision (answer.Decide, for make
// bench's profile unless the file records one) leaves undecided, with
// its tie, or "".
func undecidedRun(f *results.File) string {
	a := f.Answer
	if a == nil {
		var p results.Profile
		if f.Profile != nil {
			p = *f.Profile
		}
		d, err := answer.Decide(f, p)
		if err != nil {
			return "no answer: " + err.Error()
		}
		a = &d
	}
	var out []string
	for _, ch := range []*results.Choice{a.Correctness, a.Efficiency} {
		if ch != nil && !ch.Decided {
			out = append(out, fmt.Sprintf("%s: %s tied", ch.Intent, strings.Join(ch.Pick, ", ")))
		}
	}
	return strings.Join(out, "; ")
}

// dryRun lists cases and skipped to w, as the run would take them.
func dryRun(w io.Writer, cases []bench.Case, skipped []results.Skip) error {
	for i, c := range cases {
		fmt.Fprintf(w, "%-9s %s\n", fmt.Sprintf("[%d/%d]", i+1, len(cases)), c)
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped   %s under %s: %s\n", s.Backend, s.FaultClass, s.Reason)
	}
	fmt.Fprintf(w, "%d cases; %d fault classes left out on a backend\n", len(cases), len(skipped))
	return nil
}

// finish decides the run's answer, renders its report as opts says (no
// report when nil) and prints to w where it is, with the summary table.
func finish(w io.Writer, dir string, file *results.File, opts *report.Options) error {
	if err := decide(dir, file); err != nil {
		return err
	}
	fmt.Fprintf(w, "results: %s\n", filepath.Join(dir, "results.json"))
	if opts != nil {
		if err := opts.Write(dir, file); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		fmt.Fprintf(w, "report:  %s\n         %s\n\n", filepath.Join(dir, "index.html"), filepath.Join(dir, "report.md"))
	}
	if err := report.AnswerText(w, file); err != nil {
		return err
	}
	return report.Summary(w, file, 16)
}

// decide decides the run's answer for its profile (a zero profile when
// it has none: make bench's default) and stores it in dir's
// results.json, where the report, CI and the next round read it.
func decide(dir string, file *results.File) error {
	var p results.Profile
	if file.Profile != nil {
		p = *file.Profile
	}
	a, err := answer.Decide(file, p)
	if err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	file.Answer = &a
	return results.Write(filepath.Join(dir, "results.json"), file)
}

// newBar returns a progress bar when w is a terminal, or nil when it is a
// pipe or a file (a CI log), where the lines alone tell the progress.
func newBar(w io.Writer, n int) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions(n,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
	)
}

// progress prints to w a line per finished case, under the bar if there
// is one.
func progress(w io.Writer, bar *progressbar.ProgressBar, e bench.Event) {
	if e.Results == nil && e.Skipped == nil {
		if bar != nil {
			bar.Describe(e.Case.String())
		}
		return
	}
	if bar != nil {
		_ = bar.Clear()
	}
	n := fmt.Sprintf("[%d/%d]", e.Index+1, e.Total)
	if e.Skipped != nil {
		fmt.Fprintf(w, "%-9s skip %s: %v\n", n, e.Case, e.Skipped)
	} else {
		r := e.Results[0]
		stale := make([]string, len(e.Results))
		for i, g := range e.Results {
			stale[i] = fmt.Sprintf("%s %d", g.Guard, g.StaleAccepted)
		}
		fmt.Fprintf(w, "%-9s %-80s %8.0f grants/s  p99 %-10v incidents %-4d (lock bug %d)  linearizable %-7s stale accepted: %s\n",
			n, e.Case, r.Throughput, time.Duration(r.LatencyUS.P99)*time.Microsecond, r.Incidents, r.IncidentsLockBug, r.Linearizable,
			strings.Join(stale, ", "))
	}
	if bar != nil {
		_ = bar.Add(1)
	}
}

// backendDocs lists the registered backends, each with what its
// descriptor says it is, for the help.
func backendDocs() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, d := range backends.Descriptors() {
		fmt.Fprintf(w, "  %s\t%s\n", d.Name, d.Doc)
	}
	_ = w.Flush()
	return strings.TrimRight(b.String(), "\n")
}
