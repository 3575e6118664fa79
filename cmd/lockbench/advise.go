package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/advise"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// adviseFlags are the flags of `lockbench advise`.
type adviseFlags struct {
	profile  string
	p        advise.Profile
	hold     string
	budget   time.Duration
	dryRun   bool
	out      string
	seed     uint64
	noReport bool
	failOn   []string
	// envelopes is an envelope run's dir whose boundaries the answer
	// measures the profile against (envelope_advise.go).
	envelopes string
}

func adviseCmd() *cobra.Command {
	f := &adviseFlags{p: advise.Default()}
	cmd := &cobra.Command{
		Use:   "advise",
		Short: "Plan and run the cases that answer which lock this service should use, in rounds, within a budget",
		Long: `advise reads a service's profile (flags, or --profile FILE in YAML, flags overriding it), plans
the experiment before any server starts — the candidates (on servers the team runs, or that it
would add), the fault classes that matter for the intent and why each is in or out, the tested
injections and independent trials each comparison needs at the answer's family-wise level, the
estimated time — and runs it in rounds: after each, only the comparisons that could still change
the answer get more injections or fresh trials, until it is decided, the budget is spent or the
rounds are. --dry-run prints the plan and starts nothing. The answer comes first, then the report.

The profile in YAML (every field optional; durations as 200ms, 5s):

  intent: correctness          # efficiency | correctness | both
  have: [redis, postgres]      # server kinds the team runs: redis, sentinel, postgres, zookeeper, etcd
  backends: []                 # candidate specs (default: every backend of make bench)
  hold: 10ms,200ms             # p50[,p99]
  ttl: 5s
  auto-extend: false
  clients: 8
  keys: 100                    # with key-dist uniform or zipf; hot uses one key
  key-dist: uniform
  token: write                 # none | write | read-write: what the resource checks
  max-pause: 2s                # longest GC/VM stall of a holder (0: none)
  clock-step: 0                # largest clock step (0: slew only)
  unavailability: 5s           # acceptable time without grants after a fault`,
		Example: `  # what make bench runs: the default profile, both intents, within 15 minutes
  lockbench advise --budget 15m --out results/now

  # the plan for a service, and nothing started
  lockbench advise --intent correctness --have redis,postgres --hold 10ms,200ms --ttl 5s --dry-run

  # a service's profile from a file, flags overriding it
  lockbench advise --profile service.yaml --clients 8 --out results/service

  # in CI: exit 3 when a real lock broke or the answer is not decided
  lockbench advise --profile service.yaml --budget 30m --fail-on lock-bug,undecided --out results/ci`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	d := advise.Default()
	fl.StringVar(&f.profile, "profile", "", "the service's profile in YAML (flags override its fields)")
	fl.StringVar(&f.p.Intent, "intent", d.Intent, "what the lock is for: efficiency, correctness or both")
	fl.StringSliceVar(&f.p.Have, "have", d.Have, "server kinds the team runs: "+strings.Join(advise.Kinds(), ", "))
	fl.StringSliceVar(&f.p.Backends, "backend", nil, "candidate backends (default: every backend of make bench)")
	fl.StringVar(&f.hold, "hold", "1ms", "hold time: P50 or P50,P99")
	fl.DurationVar(&f.p.TTL, "ttl", d.TTL, "lease TTL the service asks for")
	fl.BoolVar(&f.p.AutoExtend, "auto-extend", false, "leases extend themselves while their holders hold")
	fl.IntVar(&f.p.Clients, "clients", d.Clients, "client processes that contend")
	fl.IntVar(&f.p.Keys, "keys", d.Keys, "keys (key-dist uniform or zipf)")
	fl.StringVar(&f.p.KeyDist, "key-dist", d.KeyDist, "how sections spread over keys: hot (one key), uniform or zipf")
	fl.StringVar(&f.p.Token, "token", d.Token, "what the resource can do with a fencing token: none, write or read-write")
	fl.DurationVar(&f.p.MaxPause, "max-pause", d.MaxPause, "longest stall (GC, VM) a holder sees; 0 for none")
	fl.DurationVar(&f.p.ClockStep, "clock-step", d.ClockStep, "largest step of the servers' clocks; 0 for slew only")
	fl.DurationVar(&f.p.Unavailability, "unavailability", d.Unavailability, "acceptable time without grants after a fault")
	fl.DurationVar(&f.budget, "budget", 0,
		"cap on the whole command's time, the answer and the report included; the plan says what it cannot decide within it (default: no cap)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan and start nothing")
	fl.StringVar(&f.out, "out", "", "output dir for results.json and the report (required unless --dry-run)")
	fl.Uint64Var(&f.seed, "seed", 0, "the run's seed (default random; results.json records it)")
	fl.BoolVar(&f.noReport, "no-report", false, "write results.json only")
	fl.StringVar(&f.envelopes, "envelopes", "", "an envelope run (lockbench envelope --out DIR): say how far the profile's pauses and clock "+
		"steps lie from each lock's boundary, and shade them on its charts (with --dry-run too)")
	fl.StringSliceVar(&f.failOn, "fail-on", nil, "exit 3 when any of these holds: lock-bug (a real backend's lock bug), "+
		"stale-write (a stale write the profile's resource accepted), undecided (the answer is not decided)")
	return cmd
}

// resolve returns the profile: the file's over the defaults, then the
// flags the command line gave.
func (f *adviseFlags) resolve(cmd *cobra.Command) (advise.Profile, error) {
	p := advise.Default()
	if f.profile != "" {
		data, err := os.ReadFile(f.profile)
		if err != nil {
			return p, fmt.Errorf("%w: profile: %w", bench.ErrConfig, err)
		}
		if p, err = advise.Parse(data, p); err != nil {
			return p, fmt.Errorf("%s: %w", f.profile, err)
		}
	}
	fl := cmd.Flags()
	for name, set := range map[string]func(){
		"intent": func() { p.Intent = f.p.Intent }, "have": func() { p.Have = f.p.Have }, "backend": func() { p.Backends = f.p.Backends },
		"ttl": func() { p.TTL = f.p.TTL }, "auto-extend": func() { p.AutoExtend = f.p.AutoExtend }, "clients": func() { p.Clients = f.p.Clients },
		"keys": func() { p.Keys = f.p.Keys }, "key-dist": func() { p.KeyDist = f.p.KeyDist }, "token": func() { p.Token = f.p.Token },
		"max-pause": func() { p.MaxPause = f.p.MaxPause }, "clock-step": func() { p.ClockStep = f.p.ClockStep },
		"unavailability": func() { p.Unavailability = f.p.Unavailability },
	} {
		if fl.Changed(name) {
			set()
		}
	}
	if fl.Changed("hold") {
		if err := p.SetHold(f.hold); err != nil {
			return p, err
		}
	}
	if p.KeyDist == "hot" && !fl.Changed("keys") {
		p.Keys = 1
	}
	return p, p.Validate()
}

func (f *adviseFlags) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	gates, err := parseGates(f.failOn)
	if err != nil {
		return err
	}
	p, err := f.resolve(cmd)
	if err != nil {
		return err
	}
	if f.budget < 0 {
		return fmt.Errorf("%w: --budget %v: must be positive", bench.ErrConfig, f.budget)
	}
	pl, err := advise.New(p, f.budget)
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.dryRun {
		if err := pl.Write(stdout); err != nil || f.envelopes == "" {
			return err
		}
		rp := p.Results(pl.Candidates)
		return adviseEnvelopes(stdout, f.envelopes, f.out, &results.File{Profile: &rp})
	}
	if f.out == "" {
		return fmt.Errorf("%w: --out: required (or give --dry-run)", bench.ErrConfig)
	}
	if err := pl.Write(stderr); err != nil {
		return err
	}
	env, err := serverEnv(f.out)
	if err != nil {
		return err
	}
	defer env.Close()
	var invalid []error
	total := 0
	runner := &bench.Runner{
		Clusters: bench.NewClusters(env, nil),
		Dir:      f.out,
		Seed:     f.seed,
		Progress: func(e bench.Event) {
			if errors.Is(e.Skipped, locker.ErrInvalid) || errors.Is(e.Skipped, judge.ErrProtocol) {
				invalid = append(invalid, fmt.Errorf("%s: %w", e.Case, e.Skipped))
			}
			progress(stderr, nil, e)
		},
	}
	runner.File.Command = strings.Join(os.Args, " ")
	runner.File.Suite = pl.Suite().Name
	runner.File.Skipped = pl.Skipped
	runner.File.Versions = versions(ctx)
	started := time.Now()
	run := func(ctx2 context.Context, cases []bench.Case, startBy time.Time) (*results.File, error) {
		total += len(cases)
		runner.StartBy = startBy
		return runner.Run(ctx2, cases)
	}
	rp := p.Results(pl.Candidates)
	runner.File.Profile = &rp
	file, verdict, runErr := pl.Rounds(ctx, run, advise.Decide(rp), stderr)
	if err := env.Close(); err != nil {
		fmt.Fprintln(stderr, "lockbench: stopping servers:", err)
	}
	if _, err := env.Prune(); err != nil {
		fmt.Fprintln(stderr, "lockbench: removing the servers' data:", err)
	}
	if file == nil {
		return runErr
	}
	fmt.Fprintf(stderr, "advise: %d cases in %s (budget %s)\n", total, time.Since(started).Round(time.Second), orNoCap(f.budget))
	// The last look's answer, in the file the runner last wrote without it.
	if err := results.Write(filepath.Join(f.out, "results.json"), file); err != nil {
		return err
	}
	if err := writeAnswer(stdout, file, verdict); err != nil {
		return err
	}
	if f.envelopes != "" {
		if err := adviseEnvelopes(stdout, f.envelopes, f.out, file); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, report.EnvelopesLeft)
	}
	fmt.Fprintf(stdout, "results: %s\n", filepath.Join(f.out, "results.json"))
	if !f.noReport {
		if err := report.Write(f.out, file); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		fmt.Fprintf(stdout, "report:  %s\n         %s\n\n", filepath.Join(f.out, "index.html"), filepath.Join(f.out, "report.md"))
	}
	if err := report.Summary(stdout, file, 16); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if len(invalid) > 0 {
		return fmt.Errorf("%d of %d cases not run: %w", len(invalid), total, errors.Join(invalid...))
	}
	undecided := ""
	if !verdict.Decided {
		var needs []string
		for _, n := range verdict.Needs {
			needs = append(needs, advise.Words(n))
		}
		undecided = "still needed: " + strings.Join(needs, "; ")
	}
	guard := "none"
	if p.Token == advise.TokenWrite {
		guard = string(judge.GuardFence)
	} else if p.Token == advise.TokenReadWrite {
		guard = string(judge.GuardFenceRW)
	}
	return failOn(gates, file, guard, undecided)
}

// writeAnswer prints the answer first, in the decision's words
// (results.Answer, as the report renders it), then what would settle
// what the rounds left undecided.
func writeAnswer(w io.Writer, f *results.File, v advise.Verdict) error {
	if f.Answer == nil {
		fmt.Fprintln(w, "No answer: the run was cut short before the first look.")
	}
	if err := report.AnswerText(w, f); err != nil {
		return err
	}
	if !v.Decided && len(v.Needs) > 0 {
		fmt.Fprintf(w, "What would settle the rest, beyond this run's budget (%d):\n", len(v.Needs))
		for _, n := range v.Needs {
			fmt.Fprintf(w, "  - %s\n", advise.Words(n))
		}
		fmt.Fprintln(w)
	}
	return nil
}

func orNoCap(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}
