package compose

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Pause stops the server with SIGSTOP: it keeps its connections and its
// state but answers nothing, like a process stuck in a long GC pause.
//
// It returns once every thread of the server has stopped. The kernel stops
// a process only when one of its threads, woken by the signal, runs; on a
// loaded machine the others meanwhile go on serving, for a second or more.
func (n *Node) Pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.mu.Lock()
	n.paused = true
	pid := 0
	if n.cmd != nil {
		pid = n.cmd.Process.Pid
	}
	n.mu.Unlock()
	if err := WaitStopped(pid, 10*time.Second); err != nil {
		return fmt.Errorf("compose: pause %s: %w", n.Name, err)
	}
	// The processes outside the group, once the server can fork no more.
	for _, p := range n.signalProcs(syscall.SIGSTOP) {
		if err := WaitStopped(p, 10*time.Second); err != nil {
			return fmt.Errorf("compose: pause %s: %w", n.Name, err)
		}
	}
	return nil
}

// WaitStopped waits up to d until no thread of process pid runs: each is
// stopped by a signal (SIGSTOP), or has exited. Whoever stops a process
// to pause it needs this before counting it paused.
func WaitStopped(pid int, d time.Duration) error {
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

// Resume continues a paused server with SIGCONT.
func (n *Node) Resume() error {
	n.signalProcs(syscall.SIGCONT)
	if err := n.signal(syscall.SIGCONT); err != nil {
		return err
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return nil
}

// Paused reports whether the node is stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}
