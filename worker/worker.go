// Package worker is the protocol between a runner and its client
// processes: how a client process is started (Command), what it is told
// (Assignment, as one JSON line on stdin or a file on another host), and
// its main (Main, MainFile), which joins the case on the judge, opens the
// backend and runs one client. It knows no runner: the runner (bench)
// imports it, never the other way.
package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/workloads"
)

// Command is how a runner starts a client process: Path with Args, and
// Env added to the runner's environment. The process reads its
// Assignment as one JSON line on stdin and runs Main.
type Command struct {
	Path string
	Args []string
	Env  []string
}

// Default runs this program's own `worker` subcommand (lockbench worker).
func Default() (Command, error) {
	exe, err := os.Executable()
	if err != nil {
		return Command{}, fmt.Errorf("worker processes: %w", err)
	}
	return Command{Path: exe, Args: []string{"worker"}}, nil
}

// Assignment is what a worker process is told to do: which case of which
// judge it joins as which client, the backend it opens, and the load.
type Assignment struct {
	Judge   string          `json:"judge"`
	Case    string          `json:"case"`
	Host    string          `json:"host"`
	Process int             `json:"process"`
	Backend string          `json:"backend"`
	Config  backends.Config `json:"config"`
	// Spec is the load of this one client.
	Spec workloads.Spec `json:"spec"`
}

// TokenEnv is the environment variable that hands a worker process the
// run's judge token (judge.Options.Token): never its command line, its
// assignment or a log.
const TokenEnv = "LOCKBENCH_JUDGE_TOKEN"

// Main is a client process's main: it reads its Assignment from in,
// opens the backend, joins the case on the judge and runs one client
// until the case ends. It stops when ctx ends or in is closed (its runner
// is gone), and when its line to the judge breaks.
func Main(ctx context.Context, in io.Reader) error {
	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("worker: reading the assignment: %w", err)
	}
	var a Assignment
	if err := json.Unmarshal(line, &a); err != nil {
		return fmt.Errorf("worker: assignment: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, r) // until the runner closes stdin, or dies
		cancel()
	}()
	return work(ctx, a)
}

// MainFile is the main of a client process started on another host (a
// daemon, with a pidfile): it reads its Assignment from the file at path,
// and stops when ctx ends, when its line to the judge breaks, and at the
// latest when its case is long over (Grace after its duration), so that a
// worker whose control node vanished does not run on.
func MainFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("worker: reading the assignment: %w", err)
	}
	var a Assignment
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("worker: assignment %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, Grace(a.Spec))
	defer cancel()
	return work(ctx, a)
}

// Grace is how long a worker of a case of spec may live: the workers stop
// by themselves at the end of the case, and a paused one once it is
// resumed; past that, something is stuck.
func Grace(spec workloads.Spec) time.Duration {
	return spec.Duration + spec.AcquireTimeout + 2*time.Minute
}

// work runs the client of assignment a.
func work(ctx context.Context, a Assignment) error {
	conn, err := judge.Dial(ctx, a.Judge, a.Case, a.Host, a.Process, os.Getpid(), judge.Token(os.Getenv(TokenEnv)))
	if err != nil {
		return fmt.Errorf("worker %d: %w", a.Process, err)
	}
	defer conn.Close()
	clock, unclock := newStallClock()
	defer unclock()
	a.Config.Clock = clock.now
	l, err := backends.Open(a.Backend, a.Config)
	if err != nil {
		return fmt.Errorf("worker %d: %w", a.Process, err)
	}
	defer l.Close()
	granted, stop := stopAtGrant()
	defer stop()
	return workloads.Run(ctx, a.Spec, []workloads.Client{{Process: a.Process, Locker: l, Judge: conn, Granted: granted}})
}
