package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

func judgeCmd() *cobra.Command {
	var listen, out, runID string
	var hosts int
	cmd := &cobra.Command{
		Use:   "judge --listen ADDR --out DIR",
		Short: "Referee a run whose clients run on several hosts, and write the joined results.json",
		Long: `judge runs the referee of a run on its own: the fenced resource, the start barrier and the
checkers that every client of every host reports to. Start it, then on each of --hosts hosts
run the same lockbench run with --judge ADDR (and a distinct --host): the hosts share the run's
keys and start each case together, and the judge counts two holders of a key at once across all
of them. After each case it writes DIR/results.json (the joined run: safety across every host,
latency of every client) and the case's history under DIR/history. Ctrl-C stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("judge needs --out DIR")
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			rec := &joined{path: filepath.Join(out, "results.json")}
			rec.file.Started = time.Now()
			rec.file.Command = strings.Join(os.Args, " ")
			j, err := judge.New(judge.Options{RunID: runID, Hosts: hosts, Out: out, Finished: rec.add})
			if err != nil {
				return err
			}
			rec.file.RunID = j.RunID()
			if err := j.Listen(listen); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "judge of run %s listening on %s for %d host(s); results: %s\n", j.RunID(), j.Addr(), hosts, rec.path)
			<-cmd.Context().Done()
			// Close ends every wait of every host and client at once (they
			// hear that the judge is gone), then the cases judged so far
			// are saved.
			return errors.Join(j.Close(), rec.save())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:7070", "address to listen on")
	fl.StringVar(&out, "out", "", "dir for the joined results.json and the histories (required)")
	fl.IntVar(&hosts, "hosts", 1, "hosts that join each case")
	fl.StringVar(&runID, "run-id", "", "the run's id (default random)")
	return cmd
}

// joined records the cases of a run refereed here, every host together.
type joined struct {
	path string
	mu   sync.Mutex
	file results.File
}

// add turns a judged case into its results (one per guard) and saves.
func (j *joined) add(spec judge.CaseSpec, r *judge.Result) {
	var load workloads.Spec
	var rec results.Case
	if json.Unmarshal(spec.Load, &load) != nil || json.Unmarshal(spec.Record, &rec) != nil {
		return // a runner that sent no description: nothing to record
	}
	load.Clients = r.Processes
	o := &workloads.Outcome{Spec: load, ClientsAs: results.ClientsProcesses, Result: r}
	if r.All.Info != nil {
		o.Info = *r.All.Info
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, g := range spec.Guards {
		c := rec
		c.Host = ""
		if err := o.Fill(&c, g); err != nil {
			continue
		}
		j.file.Cases = append(j.file.Cases, c)
	}
	for _, o := range r.Ops {
		if o.Host != "" && !slices.Contains(j.file.Hosts, o.Host) {
			j.file.Hosts = append(j.file.Hosts, o.Host)
		}
	}
	_ = j.saveLocked()
}

func (j *joined) save() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.saveLocked()
}

func (j *joined) saveLocked() error {
	j.file.Finished = time.Now()
	return results.Write(j.path, &j.file)
}
