package remote

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrGone is returned for a process that is not running: its pidfile is
// missing, names no process, or names a process that reused the pid.
var ErrGone = errors.New("process gone")

// ErrRunning is returned by Start when the pidfile names a process that
// still runs: starting a second one would lose track of the first.
var ErrRunning = errors.New("pidfile's process still running")

// State is what a process is doing, as a fault needs to know it.
type State int

const (
	// Gone is a process that has exited (a zombie has), or whose pidfile
	// is missing or names a process that reused the pid.
	Gone State = iota
	// Running is a process with at least one thread not stopped.
	Running
	// Stopped is a process whose every thread is stopped by a signal
	// (state T), as a SIGSTOP leaves it once the kernel has reached each
	// thread.
	Stopped
)

// String is the state's name: gone, running or stopped.
func (s State) String() string {
	switch s {
	case Gone:
		return "gone"
	case Running:
		return "running"
	case Stopped:
		return "stopped"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

func parseState(s string) (State, error) {
	switch s {
	case "gone":
		return Gone, nil
	case "running":
		return Running, nil
	case "stopped":
		return Stopped, nil
	}
	return Gone, fmt.Errorf("remote: unexpected process state %q", s)
}

// Proc is a process on a host, known by its pidfile only: a Proc can be
// made again from the pidfile's path after the control node restarted.
// Its signals go to the process's group (Start makes it the leader of a
// session of its own), so children it forked get them too.
type Proc struct {
	Remote  Remote
	Pidfile string
}

// String names the process by its host and pidfile.
func (p Proc) String() string { return p.Remote.Name() + ":" + p.Pidfile }

// Start starts d on r with Spawn, unless d.Pidfile names a process that
// still runs (ErrRunning). It returns once the process runs and its
// pidfile is written; it does not wait until the program is ready. The
// program must stay in the foreground: a server that daemonizes itself
// leaves a pidfile naming a process that has exited.
func Start(ctx context.Context, r Remote, d Daemon) (Proc, error) {
	p := Proc{Remote: r, Pidfile: d.Pidfile}
	if d.Path == "" {
		return p, fmt.Errorf("remote: start on %s: no program", r.Name())
	}
	if !path.IsAbs(d.Pidfile) {
		return p, fmt.Errorf("remote: start %s on %s: pidfile %q is not an absolute path", d.Path, r.Name(), d.Pidfile)
	}
	if d.Log != "" && !path.IsAbs(d.Log) {
		return p, fmt.Errorf("remote: start %s on %s: log %q is not an absolute path", d.Path, r.Name(), d.Log)
	}
	if err := checkEnv(d.Env); err != nil {
		return p, err
	}
	s, err := p.State(ctx)
	if err != nil {
		return p, err
	}
	if s != Gone {
		return p, fmt.Errorf("remote: start %s on %s: %s: %w", d.Path, r.Name(), d.Pidfile, ErrRunning)
	}
	if err := r.Spawn(ctx, d); err != nil {
		return p, err
	}
	return p, nil
}

// procLib is the shell functions the process scripts share.
//
// lb_proc PIDFILE sets pid and start from the pidfile, and st (the state
// letter) and t0 (the start time) of the process; it fails when the
// process is gone: no pidfile, no such process, a zombie, or another
// process that has reused the pid (its start time differs; a pidfile
// without one is taken at its word).
//
// lb_scan PID prints, sorted, the living processes that belong to PID:
// itself, the members of its process group, and every descendant of
// those, whatever session or group it moved to (a PostgreSQL server's
// children each start a session of their own); it reads every process's
// stat, which takes tens of milliseconds on a busy host. lb_tree PID is
// quicker, with no process started: PID and its living descendants, read
// from the kernel's lists of children (/proc/PID/task/TID/children, where
// the kernel has them; lb_scan where not). Every caller signals PID's
// group as a whole as well, so a member of the group that is no
// descendant (an orphan) is reached all the same. lb_anyrun PIDS succeeds
// when a thread of one of PIDS is not stopped. lb_freeze PID [all] sends
// SIGSTOP to PID's processes until two looks find the same ones (and,
// with all, until every thread of them is stopped), and sets tree to
// them: a process with a SIGSTOP pending forks no more, so no process of
// the tree can leave it unseen.
//
// lb_state prints running, stopped (every thread of every process of the
// tree in state T or t) or gone (the pidfile's process is). lb_wait STATE
// PIDFILE polls until lb_state prints STATE, and fails (status 3) when
// the process is gone first: a process resumed at the end of its work may
// exit before a look finds it running.
const procLib = `PATH=$PATH:/usr/sbin:/sbin
lb_fields() { set -- $1; st=$1; t0=${20}; }
lb_proc() {
	pid= start= st= t0=
	{ IFS= read -r pid; IFS= read -r start; } 2>/dev/null < "$1"
	case $pid in ''|*[!0-9]*) return 1;; esac
	IFS= read -r s 2>/dev/null < "/proc/$pid/stat" || return 1
	lb_fields "${s##*) }"
	case $st in Z|X|x) lb_livetask "$pid" || return 1;; esac
	[ -z "$start" ] || [ "$start" = "$t0" ]
}
# A thread group's leader shows Z as soon as it has exited, while its other
# threads may still be dying with the files they share (a server's
# listening socket among them): the process has gone only when they have.
lb_livetask() {
	for f in /proc/"$1"/task/*/stat; do
		IFS= read -r s 2>/dev/null < "$f" || continue
		case ${s##*) } in Z*|X*|x*) ;; *) return 0;; esac
	done
	return 1
}
lb_stat='function lb_after(l) { while ((k = index(l, ") ")) > 0) l = substr(l, k + 2); return l }'
lb_tree() {
	[ -e "/proc/$1/task/$1/children" ] || { lb_scan "$1"; return; }
	lb_q=$1
	while [ -n "$lb_q" ]; do
		set -- $lb_q
		lb_q=
		for p; do
			IFS= read -r s 2>/dev/null < "/proc/$p/stat" || continue
			case ${s##*) } in Z*|X*|x*) continue;; esac
			echo "$p"
			for f in /proc/"$p"/task/*/children; do
				c=
				IFS= read -r c 2>/dev/null < "$f" # no newline at its end: read fails, c is set
				lb_q="$lb_q $c"
			done
		done
	done
}
lb_scan() {
	awk -v root="$1" "$lb_stat"'
	BEGIN {
		for (i = 1; i < ARGC; i++) {
			if ((getline l < ARGV[i]) > 0) {
				split(lb_after(l), f, " "); p = substr(l, 1, index(l, " ") - 1)
				st[p] = f[1]; pp[p] = f[2]; pg[p] = f[3]
			}
			close(ARGV[i])
		}
		t[root] = 1
		for (p in pg) if (pg[p] == root) t[p] = 1
		do {
			more = 0
			for (p in pp) if (!(p in t) && (pp[p] in t)) { t[p] = 1; more = 1 }
		} while (more)
		for (p in t) if ((p in st) && st[p] !~ /^[ZXx]/) print p
	}' /proc/[0-9]*/stat | sort -n
}
lb_anyrun() {
	[ $# -gt 0 ] || return 1
	lb_files=
	for p; do lb_files="$lb_files /proc/$p/task/*/stat"; done
	awk "$lb_stat"'
	BEGIN {
		for (i = 1; i < ARGC; i++) {
			if ((getline l < ARGV[i]) > 0 && lb_after(l) !~ /^[TtZXx]/) exit 0
			close(ARGV[i])
		}
		exit 1
	}' $lb_files
}
lb_freeze() {
	kill -s STOP -- "-$1" 2>/dev/null || kill -s STOP "$1" 2>/dev/null
	tree=
	while :; do
		now=$(lb_tree "$1")
		kill -s STOP $now 2>/dev/null
		if [ "$now" = "$tree" ]; then
			[ -z "$2" ] && return 0
			lb_anyrun $now || return 0
		fi
		tree=$now
		lb_nap
	done
}
lb_state() {
	lb_proc "$1" || { echo gone; return; }
	if lb_anyrun $(lb_tree "$pid"); then echo running; else echo stopped; fi
}
lb_nap() { sleep 0.01 2>/dev/null || sleep 1; }
lb_now() { IFS=' ' read -r now _ < /proc/uptime; now=${now%.*}${now#*.}; now=${now#0}; }
lb_wait() {
	while lb_s=$(lb_state "$2"); [ "$lb_s" != "$1" ]; do
		[ "$lb_s" != gone ] || return 3 # it will be in no other state again
		lb_nap
	done
}
`

// exitGone is the status the process scripts exit with when the process
// is gone.
const exitGone = 3

// State reads the process's state on its host.
func (p Proc) State(ctx context.Context) (State, error) {
	out, err := scriptOutput(ctx, p.Remote, "state", procLib+`lb_state "$1"`, p.Pidfile)
	if err != nil {
		return Gone, fmt.Errorf("remote: state of %s: %w", p, err)
	}
	return parseState(out)
}

// Pid returns the process's pid on its host (in the host's pid
// namespace), or ErrGone.
func (p Proc) Pid(ctx context.Context) (int, error) {
	out, err := scriptOutput(ctx, p.Remote, "pid", procLib+`lb_proc "$1" || exit 3; echo "$pid"`, p.Pidfile)
	if err != nil {
		return 0, p.goneOr("pid", err)
	}
	pid, err := strconv.Atoi(out)
	if err != nil {
		return 0, fmt.Errorf("remote: pid of %s: %q", p, out)
	}
	return pid, nil
}

// Signal sends sig to the process's processes — its group, and every
// descendant, whatever group it moved to — ErrGone if it is not running.
func (p Proc) Signal(ctx context.Context, sig syscall.Signal) error {
	name, err := signalName(sig)
	if err != nil {
		return err
	}
	return p.signal(ctx, name, "")
}

// signal sends the signal named name to the process's group and tree
// and then, when until is a state, waits until the process is in it.
func (p Proc) signal(ctx context.Context, name, until string) error {
	body := procLib + `lb_proc "$1" || exit 3
kill -s "$2" -- "-$pid" 2>/dev/null || kill -s "$2" "$pid" || exit 1
kill -s "$2" $(lb_tree "$pid") 2>/dev/null
[ -z "$3" ] || lb_wait "$3" "$1"`
	if err := script(ctx, p.Remote, "signal", body, nil, p.Pidfile, name, until); err != nil {
		return p.goneOr("SIG"+name, err)
	}
	return nil
}

// Pause stops the process and every process of its tree with SIGSTOP, as
// a long GC pause would, and returns once every thread of them is
// stopped: the kernel stops a thread only when it next runs, and on a
// loaded host the others go on serving meanwhile, for a second or more.
// The leader stops first, so it forks no child that escapes.
func (p Proc) Pause(ctx context.Context) error {
	body := procLib + `lb_proc "$1" || exit 3
lb_freeze "$pid" all`
	if err := script(ctx, p.Remote, "pause", body, nil, p.Pidfile); err != nil {
		return p.goneOr("SIGSTOP", err)
	}
	return nil
}

// Resume continues a paused process and its tree (SIGCONT) and returns
// once a thread of it runs, or ErrGone once it has exited (as a process
// resumed at the end of its work may, before a look finds it running).
func (p Proc) Resume(ctx context.Context) error { return p.signal(ctx, "CONT", "running") }

// Wait returns once the process is in state s, or ctx ends.
func (p Proc) Wait(ctx context.Context, s State) error {
	if err := script(ctx, p.Remote, "wait", procLib+`lb_wait "$2" "$1"`, nil, p.Pidfile, s.String()); err != nil {
		return p.goneOr("wait until "+s.String(), err)
	}
	return nil
}

// Kill kills the process and every process of its tree with SIGKILL (a
// crash: no chance to save anything) and returns once all have gone.
// The tree is frozen (SIGSTOP) first, so no process of it forks, or
// leaves it for init, unseen. Killing a process that is gone does
// nothing; what is left of a group whose leader died is killed too.
func (p Proc) Kill(ctx context.Context) error { return p.stop(ctx, "KILL", 0) }

// Stop asks the process to shut down with SIGTERM (see Terminate).
func (p Proc) Stop(ctx context.Context, grace time.Duration) error {
	return p.stop(ctx, "TERM", grace)
}

// Terminate asks the process to shut down with sig, sent to its group
// (and SIGCONT to its tree, since a paused process cannot), and kills its
// tree as Kill does if it has not gone after grace. It returns once the
// process and every process its tree held when sig was sent have gone. A
// server that wants another signal than SIGTERM to shut down fast
// (PostgreSQL: SIGINT) is stopped with it.
func (p Proc) Terminate(ctx context.Context, sig syscall.Signal, grace time.Duration) error {
	name, err := signalName(sig)
	if err != nil {
		return err
	}
	return p.stop(ctx, name, grace)
}

func (p Proc) stop(ctx context.Context, name string, grace time.Duration) error {
	// The group lives on as long as a process is in it, and its id cannot
	// be reused meanwhile: remnants of a group whose leader has died are
	// ours to kill, unless another process has taken the leader's pid.
	body := procLib + `tree=
if lb_proc "$1"; then
	if [ "$2" = KILL ]; then
		lb_freeze "$pid"
		kill -s KILL -- "-$pid" 2>/dev/null
		kill -s KILL "$pid" $tree 2>/dev/null
	else
		tree=$(lb_tree "$pid")
		kill -s "$2" -- "-$pid" 2>/dev/null || kill -s "$2" "$pid" 2>/dev/null
		kill -s CONT -- "-$pid" 2>/dev/null
		kill -s CONT "$pid" $tree 2>/dev/null
	fi
elif [ -n "$pid" ] && [ ! -e "/proc/$pid" ] && kill -s 0 -- "-$pid" 2>/dev/null; then
	kill -s KILL -- "-$pid" 2>/dev/null
else
	exit 0
fi
# A process that is a zombie has gone: its parent (the host's init, for
# an orphan) may take its time to reap it.
alive() {
	lb_proc "$1" && return 0
	if [ -n "$pid" ] && [ ! -e "/proc/$pid" ] && [ -n "$(lb_scan "$pid")" ]; then
		return 0 # what is left of its group
	fi
	for p in $tree; do
		IFS= read -r s 2>/dev/null < "/proc/$p/stat" || continue
		case ${s##*) } in Z*|X*|x*) ;; *) return 0;; esac
	done
	return 1
}
lb_now; end=$((now+$3))
killed=
while alive "$1"; do
	lb_now
	if [ "$2" != KILL ] && [ -z "$killed" ] && [ "$now" -ge "$end" ]; then
		killed=1
		old=$tree
		if lb_proc "$1"; then lb_freeze "$pid"; kill -s KILL -- "-$pid" 2>/dev/null; kill -s KILL "$pid" $tree 2>/dev/null; fi
		kill -s KILL -- "-$pid" 2>/dev/null
		kill -s KILL $old $tree 2>/dev/null
		tree="$old $tree"
	fi
	lb_nap
done`
	// The host's clock since boot, in hundredths of a second, times the
	// grace: /proc/uptime is read without a process per look.
	cs := strconv.FormatInt(int64(grace/(10*time.Millisecond)), 10)
	if err := script(ctx, p.Remote, "stop", body, nil, p.Pidfile, name, cs); err != nil {
		return fmt.Errorf("remote: SIG%s %s: %w", name, p, err)
	}
	return nil
}

// goneOr maps a script's exitGone to ErrGone.
func (p Proc) goneOr(what string, err error) error {
	if e, ok := IsExit(err); ok && e.Code == exitGone {
		return fmt.Errorf("remote: %s %s: %w", what, p, ErrGone)
	}
	return fmt.Errorf("remote: %s %s: %w", what, p, err)
}

// signalName is sig's name as kill -s takes it (without SIG).
func signalName(sig syscall.Signal) (string, error) {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT", syscall.SIGKILL: "KILL",
		syscall.SIGUSR1: "USR1", syscall.SIGUSR2: "USR2", syscall.SIGTERM: "TERM",
		syscall.SIGCONT: "CONT", syscall.SIGSTOP: "STOP", syscall.SIGALRM: "ALRM",
	}
	if n, ok := names[sig]; ok {
		return n, nil
	}
	return "", fmt.Errorf("remote: signal %d (%v) is not one lockbench sends", int(sig), strings.ToUpper(sig.String()))
}

// Alive reports, for each pidfile on r's host, whether its process runs
// (a paused one does; a zombie does not), with one command for them all:
// a runner watches its workers on a host this way.
func Alive(ctx context.Context, r Remote, pidfiles ...string) ([]bool, error) {
	if len(pidfiles) == 0 {
		return nil, nil
	}
	out, err := scriptOutput(ctx, r, "alive", procLib+`for pf; do if lb_proc "$pf"; then echo 1; else echo 0; fi; done`, pidfiles...)
	if err != nil {
		return nil, fmt.Errorf("remote: processes on %s: %w", r.Name(), err)
	}
	lines := strings.Fields(out)
	if len(lines) != len(pidfiles) {
		return nil, fmt.Errorf("remote: processes on %s: %d answers for %d pidfiles", r.Name(), len(lines), len(pidfiles))
	}
	alive := make([]bool, len(lines))
	for i, l := range lines {
		alive[i] = l == "1"
	}
	return alive, nil
}
