// Command lockbench measures distributed locks: throughput, tail latency
// and safety violations of every backend under the same workloads and
// faults, on real servers it starts itself (or yours), ending in a report
// that recommends one.
//
//	lockbench run --suite default --out results/   # what make bench runs
//	lockbench run --backend redlock,etcd --workload hot --fault restart --fencing --clients 8 --trials 3 --out DIR
//	lockbench report DIR                             # re-render DIR/results.json
//	lockbench report --compare BASE HEAD --out DIR   # compare two runs
//	lockbench report --merge A B --out DIR           # merge runs from several load generators
//	lockbench backends                               # what each backend guarantees
//	lockbench --version                              # the module version and commit of this binary
//	lockbench cluster --backend redlock              # start servers and print their addresses
//	lockbench hosts check --inventory hosts.yaml     # verify the hosts of a run over SSH
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	_ "github.com/lockbench/lockbench/backends/all"
)

// quiet drops go-redis's own log lines (a pool that cannot reach a node
// it was told to kill, say): lockbench reports node errors itself.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// rootCmd returns the lockbench command and its subcommands, writing to
// the command's Out and Err (stdout and stderr unless set otherwise).
func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "lockbench",
		Short:         "Measure distributed locks: throughput, tail latency and safety violations under faults",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetVersionTemplate("lockbench {{.Version}}\n")
	root.AddCommand(runCmd(), adviseCmd(), reportCmd(), backendsCmd(), clusterCmd(), workerCmd(), proxyCmd(), judgeCmd(), checkCmd(),
		hostsCmd(), lazyfsCmd(), envelopeCmd())
	root.AddCommand(admitCmds()...)
	return root
}

func main() {
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first Ctrl-C stops the run gracefully (servers stopped, partial
	// results kept); a second one kills at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := rootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		code := 1
		if e, ok := errors.AsType[*exitError](err); ok {
			code = e.code
		}
		os.Exit(code)
	}
}

// exitError is an error with the exit status it calls for (lockbench
// check's gates); any other error exits 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
