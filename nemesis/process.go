package nemesis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/worker"
)

// A Process is a client process a client pause stops and resumes: one of
// this machine's (AddProcess), or one started on another host through its
// Remote (remote.Proc, found by its pidfile).
type Process interface {
	// Pause stops the process (SIGSTOP) and returns once every thread of
	// it is stopped; an error wrapping remote.ErrGone says there was no
	// process to stop (any other may leave it stopped in part: it is
	// resumed all the same).
	Pause(ctx context.Context) error
	// Resume continues it (SIGCONT).
	Resume(ctx context.Context) error
}

// AddProcess gives n a client process of the case on this machine, by
// its number on the judge: the processes a client pause may stop.
func (n *Nemesis) AddProcess(process int, p *os.Process) { n.AddClient(process, localProcess{p}) }

// AddClient gives n a client process of the case, wherever it runs, by
// its number on the judge.
func (n *Nemesis) AddClient(process int, p Process) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.procs[process] = p
}

// localProcess is a client process of this machine.
type localProcess struct{ p *os.Process }

func (l localProcess) Pause(context.Context) error {
	if err := l.p.Signal(syscall.SIGSTOP); errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%w: %w", remote.ErrGone, err)
	} else if err != nil {
		return err
	}
	return waitStopped(l.p.Pid, 10*time.Second)
}

func (l localProcess) Resume(context.Context) error {
	if err := l.p.Signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// hostOf names the host a client process runs on when it is not this
// machine.
func hostOf(p Process) []string {
	if rp, ok := p.(remote.Proc); ok {
		if h, ok := rp.Remote.(*remote.SSH); ok {
			return []string{h.Name()}
		}
	}
	return nil
}

// Pause stops client process for d (judge.Pauser): SIGSTOP, then it waits
// until every thread has stopped; SIGCONT after d. Each pause is an
// injection of the fault, recorded with its process.
func (n *Nemesis) Pause(process int, d time.Duration) error {
	n.mu.Lock()
	proc := n.procs[process]
	n.mu.Unlock()
	if _, ok := n.started(); proc == nil || !ok {
		return fmt.Errorf("process %d: not a client process of this case, or the case has not started", process)
	}
	ctx, cancel := context.WithTimeout(context.Background(), worker.ArmWindow+10*time.Second)
	defer cancel()
	n.mu.Lock()
	armed, self := n.selfStops[process]
	delete(n.selfStops, process)
	n.mu.Unlock()
	var err error
	if self {
		err = stopSelf(ctx, proc, armed)
	} else {
		err = proc.Pause(ctx)
	}
	if err != nil && errors.Is(err, remote.ErrGone) {
		return fmt.Errorf("pause process %d: %w", process, err)
	}
	// Stopped, or stopped in part: resumed after d all the same.
	inj := n.inject(fmt.Sprintf("process %d stopped for %v", process, d), results.Target{Nodes: []string{fmt.Sprintf("process "+
		"%d", process)}, Hosts: hostOf(proc)})
	n.pauses.Add(1)
	time.AfterFunc(d, func() {
		defer n.pauses.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := proc.Resume(ctx); err != nil && !errors.Is(err, remote.ErrGone) {
			n.fail(fmt.Errorf("resume process %d: %w", process, err))
		}
		inj.end()
	})
	// The pause comes inside the holder's section, by the judge's hook:
	// the section is open and the lock just granted it. What is left to
	// prove is that the process really stopped: every thread in state T.
	if err != nil {
		err = fmt.Errorf("pause process %d: %w", process, err)
		n.fail(err)
		inj.prove(proof{whyNot: err.Error()})
		return err
	}
	pre := "inside the section the judge granted it"
	if self {
		pre = armed.where
	}
	inj.prove(proof{tested: true, precondition: pre, effect: fmt.Sprintf("every thread of process %d stopped (state T)", process)})
	return nil
}

// waitStopped waits up to d until no thread of process pid, of this
// machine, runs: each is stopped by a signal (SIGSTOP), or has exited. A
// client process is counted paused only then: the kernel stops a process
// when one of its threads, woken by the signal, runs, and on a loaded
// machine the others meanwhile go on.
func waitStopped(pid int, d time.Duration) error {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		running, err := runningThreads(pid)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d: %d threads still running %v after SIGSTOP", pid, running, d)
		}
		<-tick.C
	}
}

// runningThreads counts the threads of process pid that are not stopped
// (state T) or dead (Z, X). A process that has gone has none.
func runningThreads(pid int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	running := 0
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if err != nil {
			continue // the thread has exited
		}
		// The state follows the command name, which is in parentheses
		// and may itself contain them.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return 0, fmt.Errorf("%s/%s/stat: cannot parse %q", dir, t.Name(), b)
		}
		switch b[i+2] {
		case 'T', 'Z', 'X', 'x':
		default:
			running++
		}
	}
	return running, nil
}
