package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	var listen, out, runID, tokenFile string
	var hosts int
	cmd := &cobra.Command{
		Use:   "judge --listen ADDR --out DIR",
		Short: "Referee a run whose clients run on several hosts, and write the joined results.json",
		Long: `judge runs the referee of a run on its own: the fenced resource, the start barrier and the
checkers that every client of every host reports to. Start it, then on each of --hosts hosts
run the same lockbench run with --judge ADDR (and a distinct --host): the hosts share the run's
keys and start each case together, and the judge counts two holders of a key at once across all
of them. After each case it writes DIR/results.json (the joined run: safety across every host,
latency of every client) and the case's history under DIR/history; a case it cannot record is
said at once, reaches the hosts' results as a note, and makes the judge exit with an error.
Ctrl-C stops it at once, whatever the hosts are doing: they hear that the judge is gone.

Beyond loopback the judge takes reports only from the run's own hosts: --token-file names the
run's token, read from the file or, when it does not exist, made and written there (mode 0600);
give that file to each host's lockbench run --judge ADDR --judge-token-file FILE. A connection
without it is refused and named on stderr.`,
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
			token, err := judgeToken(tokenFile)
			if err != nil {
				return err
			}
			j, err := judge.New(judge.Options{RunID: runID, Hosts: hosts, Out: out, Finished: rec.finished(cmd.ErrOrStderr()),
				Token: token, Log: cmd.ErrOrStderr()})
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
	fl.StringVar(&tokenFile, "token-file", "", "the run's token, read from this file, or made and written there (needed to listen beyond "+
		"loopback)")
	return cmd
}

// judgeToken returns the run token in path, making one there (mode 0600)
// when the file does not exist; "" without a path.
func judgeToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	if _, err := os.Stat(path); err == nil {
		return readToken(path)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("the run token: %w", err)
	}
	_, err = fmt.Fprintln(f, tok)
	if err := errors.Join(err, f.Close()); err != nil {
		return "", fmt.Errorf("the run token: %w", err)
	}
	return tok, nil
}

// joined records the cases of a run refereed here, every host together.
type joined struct {
	path string
	mu   sync.Mutex
	file results.File
	// unrecorded are the cases the judge could not record.
	unrecorded []error
}

// add turns a judged case into its results (one per guard) and saves
// them; the error says why the case is not in the file (or not saved).
func (j *joined) add(spec judge.CaseSpec, r *judge.Result) error {
	if spec.Record == nil {
		return fmt.Errorf("case %s (%s): its runner described no record of it", spec.ID, spec.Name)
	}
	base := *spec.Record
	base.Host = ""             // every host's
	base.Clients = r.Processes // of every host
	o := &workloads.Outcome{ClientsAs: results.ClientsProcesses, Result: r}
	if r.All.Info != nil {
		o.Info = *r.All.Info
	}
	if in := r.Injections; in != nil { // the nemesis's, told by its runner
		o.Windows, o.Targets, o.FaultFailures = in.Windows, in.Targets, in.Failures
		o.Notes = append(o.Notes, in.Notes...)
	}
	cs, err := o.Cases(base, spec.Guards)
	if err != nil {
		return fmt.Errorf("case %s (%s): %w", spec.ID, spec.Name, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.file.Cases = append(j.file.Cases, cs...)
	for _, o := range r.Ops {
		if o.Host != "" && !slices.Contains(j.file.Hosts, o.Host) {
			j.file.Hosts = append(j.file.Hosts, o.Host)
		}
	}
	if err := j.saveLocked(); err != nil {
		return fmt.Errorf("case %s (%s): %w", spec.ID, spec.Name, err)
	}
	return nil
}

// finished is the judge's Options.Finished: it adds the case, and says
// on w, at once, when it cannot; the error then goes back to the hosts.
func (j *joined) finished(w io.Writer) func(judge.CaseSpec, *judge.Result) error {
	return func(spec judge.CaseSpec, r *judge.Result) error {
		err := j.add(spec, r)
		if err != nil {
			fmt.Fprintf(w, "judge: not recorded: %v\n", err)
			j.mu.Lock()
			j.unrecorded = append(j.unrecorded, err)
			j.mu.Unlock()
		}
		return err
	}
}

// save writes the file once more, and fails when a case could not be
// recorded: the joined results are then incomplete.
func (j *joined) save() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.saveLocked()
	if n := len(j.unrecorded); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d judged case(s) missing from %s: %w", n, j.path, errors.Join(j.unrecorded...)))
	}
	return err
}

func (j *joined) saveLocked() error {
	j.file.Finished = time.Now()
	if err := results.Write(j.path, &j.file); err != nil {
		return fmt.Errorf("saving the joined results: %w", err)
	}
	return nil
}
