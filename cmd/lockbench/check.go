package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
)

func checkCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check DIR",
		Short: "Re-check every history of a saved run; exit 1 when one is not linearizable",
		Long: `check reads DIR/results.json and, for every case, its history (DIR/history/*.jsonl.gz): it
counts the overlaps again (each classified lock bug or expired holder), the incidents, stale
writes, lost updates and token regressions under the case's guard, and runs porcupine on the
history with a mutex model and a fenced-mutex model. It prints what it found, says where a
count differs from results.json, and exits 1 when a history is not linearizable as a mutex —
which the noop control, and any lock that let two holders in, is not.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, f, err := readRun(args[0])
			if err != nil {
				return err
			}
			return check(cmd.OutOrStdout(), dir, f, timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", judge.DefaultCheckTimeout, "bound on each linearizability check")
	return cmd
}

// verdicts are a history's linearizability verdicts.
type verdicts struct{ mutex, fenced history.Verdict }

// check re-checks the histories of f, writing a line per case to w.
func check(w io.Writer, dir string, f *results.File, timeout time.Duration) error {
	checked := map[string]verdicts{}
	histories := map[string][]history.Op{}
	var bad, differ, missing int
	for _, c := range f.Cases {
		name := fmt.Sprintf("%s %s/%s guard=%s trial=%d", c.Backend, c.Workload, c.Fault, c.Guard, c.Trial)
		if c.History == "" {
			fmt.Fprintf(w, "%s: no history recorded\n", name)
			missing++
			continue
		}
		ops, ok := histories[c.History]
		if !ok {
			var err error
			if ops, err = history.ReadFile(filepath.Join(dir, c.History)); err != nil {
				return err
			}
			histories[c.History] = ops
			checked[c.History] = verdicts{history.Linearizable(ops, timeout), history.LinearizableFenced(ops, timeout)}
		}
		v := checked[c.History]
		r := history.Check(ops, c.Guard, judge.Guard(c.Guard).Fenced())
		fmt.Fprintf(w, "%s: %d sections, %d overlaps (%d lock bug, %d expired holder) in %d incidents, stale writes %d accepted %d rejected, %d lost updates, %d token regressions; linearizable: %s; fenced: %s\n",
			name, r.Sections, r.Overlaps, r.OverlapsLockBug, r.OverlapsExpiredHolder, r.Incidents, r.StaleAccepted, r.StaleRejected,
			r.LostUpdates, r.TokenRegressions, verdictText(v.mutex), verdictText(v.fenced))
		if v.mutex.Result == results.NotLinearizable {
			bad++
		}
		recorded := [...]int64{c.Overlaps, c.OverlapsLockBug, c.Incidents, c.StaleAccepted, c.LostUpdates, c.TokenRegressions}
		found := [...]int64{r.Overlaps, r.OverlapsLockBug, r.Incidents, r.StaleAccepted, r.LostUpdates, r.TokenRegressions}
		if recorded != found || (c.Linearizable.Known() && v.mutex.Result.Known() && c.Linearizable != v.mutex.Result) {
			fmt.Fprintf(w, "  differs from results.json: overlaps, lock bugs, incidents, stale accepted, lost, regressions %v recorded, %v found; linearizable %s recorded\n",
				recorded, found, c.Linearizable)
			differ++
		}
	}
	fmt.Fprintf(w, "%d cases, %d histories: %d cases not linearizable, %d differing from results.json, %d without a history\n",
		len(f.Cases), len(histories), bad, differ, missing)
	if bad > 0 {
		return fmt.Errorf("%d of %d cases have a history that is not linearizable as a mutex", bad, len(f.Cases))
	}
	return nil
}

func verdictText(v history.Verdict) string {
	if v.Reason == "" {
		return string(v.Result)
	}
	return fmt.Sprintf("%s (%s)", v.Result, v.Reason)
}
