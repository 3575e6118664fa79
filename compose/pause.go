package compose

import (
	"context"
	"fmt"
	"time"
)

// Pause stops the server with SIGSTOP: it keeps its connections and its
// state but answers nothing, like a process stuck in a long GC pause.
// Every process of the server stops, its children in sessions of their
// own too (a PostgreSQL server's).
//
// It returns once every thread of the server has stopped. The kernel stops
// a process only when one of its threads, woken by the signal, runs; on a
// loaded machine the others meanwhile go on serving, for a second or more.
func (n *Node) Pause() error {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	if !n.Running() {
		return fmt.Errorf("compose: %s is not running", n.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pauseTimeout)
	defer cancel()
	if err := n.proc.Pause(ctx); err != nil {
		return fmt.Errorf("compose: pause %s: %w", n.Name, err)
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
	return nil
}

// pauseTimeout bounds how long Pause waits for every thread to stop.
const pauseTimeout = 30 * time.Second

// Resume continues a paused server with SIGCONT.
func (n *Node) Resume() error {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	if !n.Running() {
		return fmt.Errorf("compose: %s is not running", n.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := n.proc.Resume(ctx); err != nil {
		return fmt.Errorf("compose: resume %s: %w", n.Name, err)
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
