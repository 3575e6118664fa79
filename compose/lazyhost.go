package compose

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/remote"
)

// A lazyDisk is a node's disk under a lazy filesystem, wherever the
// filesystem is served: by this process for a node on this machine
// (*lazyFS), by a lazyfs daemon on its host for a placed node
// (*lazyDaemon). Both run the same filesystem code; see lazyFS for what
// survives a power loss.
type lazyDisk interface {
	// powerLoss drops every unsynced change and remounts on what the
	// disk holds; the node's processes must be gone.
	powerLoss() (Unsynced, error)
	// pending is what a power loss would drop now.
	pending() (Unsynced, error)
	// writebackAll syncs every file.
	writebackAll() error
	// wipe empties the disk; the node's processes must be gone.
	wipe() error
	// close unmounts the filesystem (and ends its daemon).
	close() error
	// leftovers are what the disk leaves on its host besides the node's dir.
	leftovers() []string
}

func (l *lazyFS) pending() (Unsynced, error) { return l.unsynced(), nil }
func (l *lazyFS) leftovers() []string        { return []string{l.backing} }

// The requests a lazyfs daemon answers on its control socket (see
// LazyFSMain).
const (
	lazyOpDrop      = "drop"      // lose power: drop what is unsynced, remount
	lazyOpUnsynced  = "unsynced"  // say what a power loss would drop
	lazyOpWriteback = "writeback" // sync every file
	lazyOpWipe      = "wipe"      // empty the disk, remount
	lazyOpUnmount   = "unmount"   // unmount and exit
)

// lazyReply is a lazyfs daemon's answer to one request, one JSON line.
type lazyReply struct {
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
	Err   string `json:"error,omitempty"`
}

// lazyCtlTimeout bounds one request to a lazyfs daemon: a power loss
// unmounts, which a busy machine has seen take minutes (see
// lazyFS.unmount).
const lazyCtlTimeout = 5 * time.Minute

// LazyFSMain runs the hidden lazyfs command of the lockbench binary, by
// which a node placed on a host gets its lazy filesystem there, as Jepsen
// runs LazyFS on its nodes: the same filesystem as compose's on this
// machine, in a daemon of its own that the control node starts (with a
// pidfile, through the host's remote.Remote) and drives with commands run
// there.
//
//	lazyfs --backing DIR --mount DIR --control SOCKET
//
// mounts a lazy filesystem on the mount dir, whose disk is the backing
// dir, and serves it until asked to unmount (or SIGTERM, SIGINT); its
// control socket exists once the filesystem is mounted.
//
//	lazyfs ctl drop|unsynced|writeback|wipe|unmount --control SOCKET
//
// asks that daemon to lose power (drop every unsynced write and remount
// on the disk), to say what a power loss would drop, to write every file
// back, to empty its disk, or to unmount and exit; it answers when done
// with a JSON line on stdout ({"files":N,"bytes":N}: what was or would be
// dropped) and fails with the daemon's error.
func LazyFSMain(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "ctl" {
		return lazyCtlMain(ctx, args[1:], stdout)
	}
	fl := flag.NewFlagSet("lazyfs", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	backing := fl.String("backing", "", "the disk: the dir that keeps what was synced")
	mnt := fl.String("mount", "", "the dir the lazy filesystem is mounted on")
	control := fl.String("control", "", "the unix socket the daemon takes requests on")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	switch {
	case fl.NArg() > 0:
		return fmt.Errorf("lazyfs: unexpected argument %q", fl.Arg(0))
	case *backing == "" || *mnt == "" || *control == "":
		return errors.New("lazyfs: want --backing, --mount and --control")
	}
	return serveLazyFS(ctx, *backing, *mnt, *control)
}

// lazyCtlMain is LazyFSMain's ctl.
func lazyCtlMain(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("lazyfs ctl: want a request: drop, unsynced, writeback, wipe or unmount")
	}
	op := args[0]
	switch op {
	case lazyOpDrop, lazyOpUnsynced, lazyOpWriteback, lazyOpWipe, lazyOpUnmount:
	default:
		return fmt.Errorf("lazyfs ctl: request %q: want drop, unsynced, writeback, wipe or unmount", op)
	}
	fl := flag.NewFlagSet("lazyfs ctl", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	control := fl.String("control", "", "the daemon's unix socket")
	if err := fl.Parse(args[1:]); err != nil {
		return fmt.Errorf("lazyfs ctl: %w", err)
	}
	if *control == "" || fl.NArg() > 0 {
		return errors.New("lazyfs ctl: want --control SOCKET and nothing else")
	}
	ctx, cancel := context.WithTimeout(ctx, lazyCtlTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", *control)
	if err != nil {
		return fmt.Errorf("lazyfs ctl %s: %w", op, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintln(c, op); err != nil {
		return fmt.Errorf("lazyfs ctl %s: %w", op, err)
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("lazyfs ctl %s: no answer: %w", op, err)
	}
	var r lazyReply
	if err := json.Unmarshal(line, &r); err != nil {
		return fmt.Errorf("lazyfs ctl %s: answer %q: %w", op, line, err)
	}
	if r.Err != "" {
		return fmt.Errorf("lazyfs ctl %s: %s", op, r.Err)
	}
	_, err = stdout.Write(line)
	return err
}

// serveLazyFS mounts a lazy filesystem and answers requests on control
// until asked to unmount or ctx ends (SIGTERM and SIGINT end it too); it
// unmounts on every way out.
func serveLazyFS(ctx context.Context, backing, mnt, control string) (err error) {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	l, err := newLazyFS(backing, mnt)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.close()) }()
	// A socket an earlier daemon left (killed) takes no request.
	if err := os.Remove(control); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lazyfs: %w", err)
	}
	ln, err := net.Listen("unix", control)
	if err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	defer os.Remove(control)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("lazyfs: %w", err)
		}
		if l.answer(c) {
			return nil
		}
	}
}

// answer answers one request on c, one at a time (a power loss and a
// writeback must not cross); it reports whether the request was to
// unmount, which it answers once unmounted.
func (l *lazyFS) answer(c net.Conn) (unmounted bool) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(lazyCtlTimeout))
	op, err := bufio.NewReader(io.LimitReader(c, 64)).ReadString('\n')
	if err != nil {
		return false
	}
	var r lazyReply
	var u Unsynced
	switch op = strings.TrimSpace(op); op {
	case lazyOpDrop:
		u, err = l.powerLoss()
	case lazyOpUnsynced:
		u = l.unsynced()
	case lazyOpWriteback:
		err = l.writebackAll()
	case lazyOpWipe:
		err = l.wipe()
	case lazyOpUnmount:
		err, unmounted = l.close(), true
	default:
		err = fmt.Errorf("unknown request %q", op)
	}
	r.Files, r.Bytes = u.Files, u.Bytes
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	_, _ = c.Write(append(b, '\n'))
	return unmounted
}

// A lazyDaemon is the lazy filesystem of a node placed on a host, served
// there by the lazyfs command of a lockbench binary (see LazyFSMain),
// known by its pidfile, and driven by ctl commands run through the host's
// Remote.
type lazyDaemon struct {
	host                       remote.Remote
	bin, backing, mnt, control string
	proc                       remote.Proc
	log                        string
}

// startLazyDaemon mounts a lazy filesystem on dir, a placed node's dir on
// host, through the lockbench binary bin there: its disk, pidfile, log and
// control socket go beside dir. A daemon an earlier run left (its link to
// the host broke) is found by that pidfile and killed first; its mount,
// which nobody serves then, the new daemon unmounts as it starts (see
// sweepLazyFS). It returns once the filesystem is mounted.
func startLazyDaemon(ctx context.Context, host remote.Remote, bin, dir string) (*lazyDaemon, error) {
	l := &lazyDaemon{
		host: host, bin: bin, backing: diskOf(dir), mnt: dir, control: dir + ".lazyfs.sock",
		proc: remote.Proc{Remote: host, Pidfile: dir + ".lazyfs.pid"}, log: dir + ".lazyfs.log",
	}
	d := remote.Daemon{
		Path: bin, Args: []string{"lazyfs", "--backing", l.backing, "--mount", l.mnt, "--control", l.control},
		Dir: path.Dir(dir), Pidfile: l.proc.Pidfile, Log: l.log,
	}
	proc, err := startAfresh(ctx, host, d)
	if err != nil {
		return nil, fmt.Errorf("compose: lazy filesystem on %s: %w", host.Name(), err)
	}
	l.proc = proc
	if err := l.waitMounted(ctx); err != nil {
		return nil, errors.Join(err, l.close())
	}
	return l, nil
}

// waitMounted waits until the daemon takes requests (it listens once
// mounted), fails, or a minute passes.
func (l *lazyDaemon) waitMounted(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := l.ctl(ctx, lazyOpUnsynced)
		if err == nil {
			return nil
		}
		if st, serr := l.proc.State(ctx); serr == nil && st == remote.Gone {
			return fmt.Errorf("compose: the lazy filesystem on %s:%s exited: %w\n%s", l.host.Name(), l.mnt, err, l.logTail(ctx))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("compose: the lazy filesystem on %s:%s is not mounted: %w (%w)", l.host.Name(), l.mnt, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// logTail is the end of the daemon's log, for an error.
func (l *lazyDaemon) logTail(ctx context.Context) string {
	out, _ := remote.Output(ctx, l.host, "tail", "-c", "2000", "--", l.log)
	return string(out)
}

// ctl asks the daemon to do op and returns its answer.
func (l *lazyDaemon) ctl(ctx context.Context, op string) (Unsynced, error) {
	out, err := remote.Output(ctx, l.host, l.bin, "lazyfs", "ctl", op, "--control", l.control)
	if err != nil {
		return Unsynced{}, fmt.Errorf("compose: lazy filesystem on %s:%s: %w", l.host.Name(), l.mnt, err)
	}
	var r lazyReply
	if err := json.Unmarshal(out, &r); err != nil {
		return Unsynced{}, fmt.Errorf("compose: lazy filesystem on %s:%s: answer %q: %w", l.host.Name(), l.mnt, out, err)
	}
	return Unsynced{Files: r.Files, Bytes: r.Bytes}, nil
}

// do is ctl bounded by opTimeout, for the controls that take no context.
func (l *lazyDaemon) do(op string) (Unsynced, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout+lazyCtlTimeout)
	defer cancel()
	return l.ctl(ctx, op)
}

func (l *lazyDaemon) powerLoss() (Unsynced, error) { return l.do(lazyOpDrop) }
func (l *lazyDaemon) pending() (Unsynced, error)   { return l.do(lazyOpUnsynced) }

func (l *lazyDaemon) writebackAll() error {
	_, err := l.do(lazyOpWriteback)
	return err
}

func (l *lazyDaemon) wipe() error {
	_, err := l.do(lazyOpWipe)
	return err
}

func (l *lazyDaemon) leftovers() []string {
	return []string{l.backing, l.proc.Pidfile, l.log, l.control}
}

// close asks the daemon to unmount and waits for it to exit; a daemon
// that does not answer is killed by its pidfile and its mount detached
// (lazily: nobody serves it, every request on it fails).
func (l *lazyDaemon) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if st, err := l.proc.State(ctx); err == nil && st == remote.Gone {
		return l.detach(ctx)
	}
	_, err := l.ctl(ctx, lazyOpUnmount)
	if err == nil {
		if err = l.proc.Wait(ctx, remote.Gone); err == nil {
			return nil
		}
	}
	if kerr := l.proc.Kill(ctx); kerr != nil {
		return errors.Join(err, kerr)
	}
	return errors.Join(err, l.detach(ctx))
}

// detach unmounts the filesystem of a daemon that is gone, if it is still
// mounted (lazily: nobody serves it, so nothing may look into it).
func (l *lazyDaemon) detach(ctx context.Context) error {
	script := `out=$(umount -l -- "$1" 2>&1) || case $out in *"not mounted"*) ;; *) echo "$out" >&2; exit 1;; esac`
	err := l.host.Run(ctx, remote.Cmd{Path: "sh", Args: []string{"-c", script, "sh", l.mnt}})
	if err != nil {
		return fmt.Errorf("compose: unmount the lazy filesystem on %s:%s: %w", l.host.Name(), l.mnt, err)
	}
	return nil
}

// LazyFSPidfile is the pidfile, on the node's host, of the daemon that
// serves a placed node's lazy filesystem there, or "" when the node has
// none: a run that loses its link to the host names it among what it
// left there (the next run kills it by that pidfile).
func (n *Node) LazyFSPidfile() string {
	if d, ok := n.lazy.(*lazyDaemon); ok {
		return d.proc.Pidfile
	}
	return ""
}
