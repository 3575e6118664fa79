package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/envelope"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

type envelopeFlags struct {
	backends, faults, guards []string
	budget                   time.Duration
	out                      string
	n, safeN, clients        int
	seed                     uint64
	noReport                 bool
}

func envelopeCmd() *cobra.Command {
	f := &envelopeFlags{}
	cmd := &cobra.Command{
		Use:   "envelope",
		Short: "Find where each lock breaks against a fault's size: a search per lock and fault family",
		Long: `envelope searches, for each backend and fault family, the size of the fault (a client pause
in leases, a server clock jump in key lifetimes, of a majority and of a minority of the nodes)
where lock bugs start, and where late writes start under the first --guard: a bisection on a
grid of sizes 2^¼ apart, each probe a real case of --injections tested injections, the clean
end topped up to --safe-injections before the search stops. It writes DIR/results.json (every
probe's cases, and the envelopes: points, boundaries, the seed that replays each point) and the
envelope report (DIR/envelope.md, DIR/envelope.png). --budget is the whole run's time, shared
equally by the searches; a search out of time says how far it got.`,
		Example: `  lockbench envelope --backend redis,redlock,zookeeper,etcd,'postgres?mode=lease' \
    --fault client-pause,clock-jump --budget 10m --out results/envelope`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.backends, "backend", nil, "backends to search (required)")
	fl.StringSliceVar(&f.faults, "fault", envelope.Names(),
		"fault families: "+strings.Join(envelope.Names(), ", ")+" (clock-jump searches a majority and, on several nodes, a minority)")
	fl.StringSliceVar(&f.guards, "guard", []string{"none", "fence"}, "guards each probe is judged under; late writes are "+
		"searched under the first")
	fl.DurationVar(&f.budget, "budget", 10*time.Minute, "the whole run's time")
	fl.StringVar(&f.out, "out", "", "output dir (required)")
	fl.IntVar(&f.n, "injections", 3, "tested injections per probe")
	fl.IntVar(&f.safeN, "safe-injections", 6, "tested injections the clean end of a boundary is topped up to")
	fl.IntVar(&f.clients, "clients", 4, "client processes on the key")
	fl.Uint64Var(&f.seed, "seed", 0, "the searches' seed (default random; results.json records it)")
	fl.BoolVar(&f.noReport, "no-report", false, "write results.json only")
	return cmd
}

func (f *envelopeFlags) run(cmd *cobra.Command) error {
	switch {
	case f.out == "":
		return errors.New(`required flag(s) "out" not set`)
	case len(f.backends) == 0:
		return fmt.Errorf("%w: --backend: name at least one", bench.ErrConfig)
	case f.budget <= 0:
		return fmt.Errorf("%w: --budget %v: must be positive", bench.ErrConfig, f.budget)
	case f.n < 1 || f.safeN < f.n:
		return fmt.Errorf("%w: --injections %d, --safe-injections %d: want 1 ≤ injections ≤ safe-injections", bench.ErrConfig, f.n, f.safeN)
	}
	var bs []bench.Backend
	for _, s := range f.backends {
		b, err := bench.ParseBackend(s)
		if err != nil {
			return bench.ConfigError(err)
		}
		bs = append(bs, b)
	}
	var gs []judge.Guard
	for _, s := range f.guards {
		g, err := judge.ParseGuard(s)
		if err != nil {
			return bench.ConfigError(err)
		}
		gs = append(gs, g)
	}
	for _, b := range bs {
		if _, err := envelope.Families(f.faults, b); err != nil {
			return err
		}
	}
	if f.seed == 0 {
		f.seed = uint64(time.Now().UnixNano()) | 1
	}
	env, err := serverEnv(f.out)
	if err != nil {
		return err
	}
	defer env.Close()
	stderr := &lockedWriter{w: cmd.ErrOrStderr()}
	file := &results.File{Started: time.Now(), Seed: f.seed, Command: strings.Join(os.Args, " "), Cores: runtime.NumCPU(),
		Machine:  fmt.Sprintf("%d cores, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Versions: versions(cmd.Context())}
	envs, cases, runErr := envelope.Run(cmd.Context(), envelope.Options{
		Clusters: bench.NewClusters(env, nil), Backends: bs, Faults: f.faults, Guards: gs, N: f.n, SafeN: f.safeN,
		Clients: f.clients, Budget: f.budget, Seed: f.seed, Dir: f.out, Log: stderr,
	})
	if err := env.Close(); err != nil {
		fmt.Fprintln(stderr, "lockbench: stopping servers:", err)
	}
	file.Finished, file.Cases, file.Envelopes = time.Now(), cases, envs
	file.Partial = runErr != nil
	if err := results.Write(filepath.Join(f.out, "results.json"), file); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "results: %s\n", filepath.Join(f.out, "results.json"))
	if !f.noReport && len(envs) > 0 {
		if err := report.WriteEnvelopes(f.out, file, nil); err != nil {
			return errors.Join(runErr, fmt.Errorf("report: %w", err))
		}
		fmt.Fprintf(cmd.OutOrStdout(), "report:  %s\n", filepath.Join(f.out, "envelope.md"))
	}
	if err := report.EnvelopeText(cmd.OutOrStdout(), file); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}
