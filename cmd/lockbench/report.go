package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

func reportCmd() *cobra.Command {
	var compare, merge bool
	var out string
	var opts report.Options
	cmd := &cobra.Command{
		Use:   "report DIR | report --compare BASE HEAD --out DIR | report --merge RESULTS... --out DIR",
		Short: "Render a report from results.json, compare two runs, or merge runs of several load generators",
		Long: `report re-renders DIR's report from DIR/results.json.
With --compare it writes a comparison of two runs (dirs or results.json files) into --out: per
case, the throughput and p99 ratios and the change in violations, regressions flagged; and it
prints whether the two runs' answers agree (pick, runner-up, decided), and where not, which
separation one run made and the other did not.
With --merge it merges runs measured at the same time by several load-generator hosts into
--out/results.json and renders the report there: what each host measured adds up (its HDR
histograms merge without loss), the judge's joint safety counts are taken once, and files of
different runs are refused.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case compare:
				if len(args) != 2 || out == "" {
					return fmt.Errorf("report --compare needs BASE HEAD and --out DIR")
				}
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				if _, err := report.CompareFiles(out, resultsPath(args[0]), resultsPath(args[1])); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "comparison: %s\n", out)
				return agreeText(cmd.OutOrStdout(), args[0], args[1])
			case merge:
				if len(args) < 2 || out == "" {
					return fmt.Errorf("report --merge needs at least two results and --out DIR")
				}
				var files []*results.File
				for _, a := range args {
					f, err := results.Read(resultsPath(a))
					if err != nil {
						return err
					}
					files = append(files, f)
				}
				merged, err := results.Merge(files...)
				if err != nil {
					return err
				}
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				if err := results.Write(filepath.Join(out, "results.json"), merged); err != nil {
					return err
				}
				return finish(cmd.OutOrStdout(), out, merged, &opts)
			default:
				if len(args) != 1 {
					return fmt.Errorf("report needs the run's dir")
				}
				dir, f, err := readRun(args[0])
				if err != nil {
					return err
				}
				return finish(cmd.OutOrStdout(), dir, f, &opts)
			}
		},
	}
	cmd.Flags().BoolVar(&compare, "compare", false, "compare two runs: BASE HEAD")
	cmd.Flags().BoolVar(&merge, "merge", false, "merge the runs of several load generators")
	cmd.Flags().StringVar(&out, "out", "", "output dir for --compare and --merge")
	cmd.Flags().BoolVar(&opts.LinkCharts, "link-charts", false,
		"index.html links its charts (charts/*.png beside it) instead of inlining them: a page a tenth of the size")
	cmd.Flags().BoolVar(&opts.NoSVG, "no-svg", false, "write the charts as PNG only, without their SVG files")
	return cmd
}

// readRun reads a run given as its dir or its results.json, and returns
// the run dir with it.
func readRun(arg string) (string, *results.File, error) {
	f, err := results.Read(resultsPath(arg))
	if err != nil {
		return "", nil, err
	}
	dir := arg
	if filepath.Base(dir) == "results.json" {
		dir = filepath.Dir(dir)
	}
	return dir, f, nil
}

// resultsPath accepts a run dir or its results.json.
func resultsPath(p string) string {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return filepath.Join(p, "results.json")
	}
	return p
}

// agreeText prints whether the answers of the runs at a and b agree.
func agreeText(w io.Writer, a, b string) error {
	fa, err := results.Read(resultsPath(a))
	if err != nil {
		return err
	}
	fb, err := results.Read(resultsPath(b))
	if err != nil {
		return err
	}
	_, err = report.AgreeText(w, fa, fb)
	return err
}
