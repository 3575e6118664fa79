// A node's life: start it, wait until it is ready, stop, kill, restart and
// wipe it. Faults that leave it running (pause, cut, clock) live apart.

package compose

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/remote"
)

// Start starts the server if it is not running and waits until it is
// ready, ctx ends or ReadyTimeout passes: its error wraps ErrExited when
// the server exited instead, and ErrNotReady when it still runs.
//
// A node on a lazy filesystem then has its disk written back: a power
// loss drops only what the server wrote since it was ready and did not
// sync, as on a machine that has been up for a while.
func (n *Node) Start(ctx context.Context) error {
	if err := n.spawn(ctx); err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	return n.settle()
}

// settle writes the node's lazy filesystem back, if it has one.
func (n *Node) settle() error {
	if n.lazy == nil {
		return nil
	}
	if err := n.lazy.writebackAll(); err != nil {
		return fmt.Errorf("compose: write back the disk of %s: %w", n.Name, err)
	}
	return nil
}

// spawn starts the server through its host, with its pidfile, unless it
// runs.
func (n *Node) spawn(ctx context.Context) error {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	if n.Running() {
		return nil
	}
	if n.spec.Prepare != nil {
		if err := n.spec.Prepare(ctx, n); err != nil {
			return fmt.Errorf("compose: prepare %s: %w", n.Name, err)
		}
	}
	args := n.spec.Args
	if n.spec.Argv != nil {
		args = n.spec.Argv()
	}
	d := remote.Daemon{
		Path: n.spec.Binary, Args: args, Env: n.spec.Env, Dir: n.Dir, User: n.spec.User,
		Pidfile: n.proc.Pidfile, Log: n.log,
	}
	if n.lazy != nil {
		// Not on the lazy filesystem: this process serves it, and a
		// child's chdir into it, between fork and exec, would wait for
		// a process that waits for the child (Go forks with vfork).
		d.Dir = path.Dir(n.Dir)
	}
	if n.clock != nil {
		d.Env = append(slices.Clone(d.Env), n.clock.env()...)
	}
	header := fmt.Sprintf("=== %s start: %s %v", time.Now().Format(time.RFC3339Nano), n.spec.Binary, args)
	if err := n.host.Run(ctx, remote.Cmd{Path: "sh", Args: []string{"-c", `printf '%s\n' "$1" >> "$2"`, "sh", header, n.log}}); err != nil {
		return fmt.Errorf("compose: log of %s: %w", n.Name, err)
	}
	start := remote.Start
	if n.spec.place != nil && n.first() {
		start = startAfresh // a server an earlier run left on its host goes
	}
	proc, err := start(ctx, n.host, d)
	if err != nil {
		return fmt.Errorf("compose: start %s (%s) on %s: %w", n.Name, n.spec.Binary, n.host.Name(), err)
	}
	pid, err := proc.Pid(ctx)
	if err != nil {
		pid = 0 // it exited at once: waitReady says so, with its log
	}
	n.mu.Lock()
	n.running, n.started, n.pid, n.paused = true, true, pid, false
	n.mu.Unlock()
	return nil
}

// first reports whether the node has never been started in this Env.
func (n *Node) first() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.started
}

// waitReady waits until the node is ready, ctx ends or ReadyTimeout
// passes. Its error wraps ErrExited when the server's process is gone
// (with the last lines of its log, which say why), and ErrNotReady, with
// ctx's error, when it still runs as the wait ends.
func (n *Node) waitReady(ctx context.Context) error {
	start := time.Now()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	exited := func(last error) error {
		n.mu.Lock()
		n.running, n.failed = false, true
		n.mu.Unlock()
		return fmt.Errorf("compose: %s %w (%v); log:\n%s", n.Name, ErrExited, last, n.LogTail(1024))
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	var looked time.Time
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, time.Second)
		last = n.spec.Ready(probeCtx)
		probeCancel()
		if last == nil {
			return nil
		}
		// Whether the server still runs is asked of its host now and
		// then: a command each time.
		if time.Since(looked) > 250*time.Millisecond {
			looked = time.Now()
			if st, err := n.proc.State(ctx); err == nil && st == remote.Gone {
				return exited(last)
			}
		}
		select {
		case <-ctx.Done():
			// Whether it exited in the last moments tells a refusal
			// from a slow start.
			sctx, scancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
			st, err := n.proc.State(sctx)
			scancel()
			if err == nil && st == remote.Gone {
				return exited(last)
			}
			n.mu.Lock()
			n.failed = true
			n.mu.Unlock()
			return fmt.Errorf("compose: %s %w after %v: %w (last probe: %v); log:\n%s",
				n.Name, ErrNotReady, time.Since(start).Round(time.Millisecond), ctx.Err(), last, n.LogTail(1024))
		case <-tick.C:
		}
	}
}

// Kill kills the server's processes with SIGKILL and waits until they
// have gone: a crash, with no chance to save anything. Killing a node
// that is not running does nothing.
func (n *Node) Kill() error { return n.stop(syscall.SIGKILL) }

// Stop asks the server to shut down (SIGTERM, or the kind's own signal)
// and waits for it to exit, killing it if it takes longer than 10 s.
func (n *Node) Stop() error { return n.stop(cmp.Or(n.spec.Term, syscall.SIGTERM)) }

func (n *Node) stop(sig syscall.Signal) error {
	n.ctl.Lock()
	defer n.ctl.Unlock()
	if !n.Running() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// A server that had exited when nobody stopped it has failed.
	if st, err := n.proc.State(ctx); err == nil && st == remote.Gone {
		n.mu.Lock()
		n.failed = true
		n.mu.Unlock()
	}
	var err error
	if sig == syscall.SIGKILL {
		err = n.proc.Kill(ctx)
	} else {
		err = n.proc.Terminate(ctx, sig, 10*time.Second)
	}
	if err != nil {
		return fmt.Errorf("compose: stop %s: %w", n.Name, err)
	}
	n.mu.Lock()
	n.running, n.pid, n.paused = false, 0, false
	n.mu.Unlock()
	return nil
}

// Restart kills the server and starts it again. With keepData false its
// dir is wiped first, so it comes back empty (what a node without
// persistence looks like after a crash); with keepData true it recovers
// whatever it had persisted.
func (n *Node) Restart(ctx context.Context, keepData bool) error {
	if err := n.Kill(); err != nil {
		return err
	}
	if !keepData {
		if err := n.Wipe(); err != nil {
			return err
		}
	}
	return n.Start(ctx)
}

// Wipe removes the data of a stopped node: its next start finds an empty
// dir, as a server given a new disk does.
func (n *Node) Wipe() error {
	if n.Running() {
		return fmt.Errorf("compose: wipe %s: it is running", n.Name)
	}
	if n.lazy != nil {
		return n.lazy.wipe()
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := n.host.Run(ctx, remote.Cmd{Path: "sh", Args: []string{"-c", `rm -rf -- "$1" && mkdir -p -- "$1"`, "sh", n.Dir}})
	if err != nil {
		return fmt.Errorf("compose: wipe %s: %w", n.Name, err)
	}
	return nil
}
