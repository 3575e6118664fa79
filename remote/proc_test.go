package remote_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// redis starts a redis-server on tr's host that listens on a unix socket
// only (no port to collide with), with several threads.
func redis(t *testing.T, ctx context.Context, tr transport, name string) (remote.Proc, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server: skipped under -short (make unit)")
	}
	dir := path.Join(tr.dir, name)
	sock := path.Join(dir, "redis.sock")
	p, err := remote.Start(ctx, tr.r, remote.Daemon{
		Path: "redis-server", Args: []string{"--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir},
		Pidfile: path.Join(dir, "redis.pid"), Log: path.Join(dir, "redis.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(context.Background()) })
	// Ready once it answers; by then its background threads run.
	for {
		out, err := remote.Output(ctx, tr.r, "redis-cli", "-s", sock, "ping")
		if err == nil && strings.TrimSpace(string(out)) == "PONG" {
			return p, sock
		}
		if ctx.Err() != nil {
			t.Fatalf("redis on %s not ready: %v", tr.name, err)
		}
	}
}

// living reports whether process pid on r's host runs: it exists and is
// no zombie (an orphan's zombie waits for the host's init to reap it).
func living(t *testing.T, ctx context.Context, r remote.Remote, pid string) bool {
	t.Helper()
	_, err := remote.Output(ctx, r, "sh", "-c", `IFS= read -r s < "/proc/$1/stat" && set -- ${s##*) } && [ "$1" != Z ]`, "sh", pid)
	return err == nil
}

func wantState(t *testing.T, ctx context.Context, p remote.Proc, want remote.State) {
	t.Helper()
	got, err := p.State(ctx)
	if err != nil || got != want {
		t.Fatalf("%s: state %v (%v), want %v", p, got, err, want)
	}
}

func TestProcLifecycle(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			p, _ := redis(t, ctx, tr, "lifecycle")
			wantState(t, ctx, p, remote.Running)
			var pidfile bytes.Buffer
			if err := remote.Download(ctx, tr.r, p.Pidfile, &pidfile); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(pidfile.String()), "\n")
			pid, err := p.Pid(ctx)
			if err != nil || len(lines) != 2 || lines[0] != strconv.Itoa(pid) {
				t.Fatalf("pidfile %q, pid %d (%v)", pidfile.String(), pid, err)
			}
			if _, err := remote.Start(ctx, tr.r, remote.Daemon{Path: "sleep", Args: []string{"60"}, Pidfile: p.Pidfile}); !errors.Is(err, remote.ErrRunning) {
				t.Errorf("a second start on a live pidfile: %v, want ErrRunning", err)
			}
			threads, err := remote.Output(ctx, tr.r, "sh", "-c", `ls /proc/"$1"/task | wc -l`, "sh", strconv.Itoa(pid))
			if n, _ := strconv.Atoi(strings.TrimSpace(string(threads))); err != nil || n < 2 {
				t.Errorf("redis-server runs %q threads (%v): the pause test wants several", threads, err)
			}

			if err := p.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			wantState(t, ctx, p, remote.Stopped)
			if err := p.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			wantState(t, ctx, p, remote.Running)

			// A pause, then a kill: the group dies stopped.
			if err := p.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			wantState(t, ctx, p, remote.Gone)
			if living(t, ctx, tr.r, strconv.Itoa(pid)) {
				t.Errorf("pid %d still runs after Kill", pid)
			}
			if err := p.Kill(ctx); err != nil {
				t.Errorf("killing a gone process: %v", err)
			}
			if err := p.Signal(ctx, syscall.SIGSTOP); !errors.Is(err, remote.ErrGone) {
				t.Errorf("signal to a gone process: %v, want ErrGone", err)
			}
			if _, err := p.Pid(ctx); !errors.Is(err, remote.ErrGone) {
				t.Errorf("pid of a gone process: %v, want ErrGone", err)
			}

			// The pidfile's process restarts on the same pidfile.
			p2, _ := redis(t, ctx, tr, "lifecycle")
			wantState(t, ctx, p2, remote.Running)
			if err := p2.Stop(ctx, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			wantState(t, ctx, p2, remote.Gone)
		})
	}
}

// TestStopKillsWhatIgnoresTerm: a process that ignores SIGTERM, and its
// child, are gone after Stop's grace.
func TestStopKillsWhatIgnoresTerm(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			p, err := remote.Start(ctx, tr.r, remote.Daemon{
				Path: "sh", Args: []string{"-c", `trap '' TERM; sleep 600 & echo $! > "$1"; wait`, "sh", path.Join(tr.dir, "child")},
				Pidfile: path.Join(tr.dir, "stubborn.pid"),
			})
			if err != nil {
				t.Fatal(err)
			}
			var child string
			for child == "" { // the script writes it once it runs
				b, _ := remote.Output(ctx, tr.r, "sh", "-c", `cat "$1" 2>/dev/null || true`, "sh", path.Join(tr.dir, "child"))
				child = strings.TrimSpace(string(b))
				if ctx.Err() != nil {
					t.Fatal(ctx.Err())
				}
			}
			start := time.Now()
			if err := p.Stop(ctx, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			// It ignores SIGTERM: only the SIGKILL after the grace ends it.
			if took := time.Since(start); took < 200*time.Millisecond {
				t.Errorf("stopped after %v, within the grace", took)
			}
			wantState(t, ctx, p, remote.Gone)
			if living(t, ctx, tr.r, child) {
				t.Errorf("its child %s outlived Stop", child)
			}
		})
	}
}

// TestPidReuse: a pidfile whose pid now names another process (its start
// time differs) reads as gone, and neither signal nor kill reaches that
// process.
func TestPidReuse(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			other, err := remote.Start(ctx, tr.r, remote.Daemon{Path: "sleep", Args: []string{"600"}, Pidfile: path.Join(tr.dir, "other.pid")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Kill(context.Background()) })
			pid, err := other.Pid(ctx)
			if err != nil {
				t.Fatal(err)
			}
			stale := remote.Proc{Remote: tr.r, Pidfile: path.Join(tr.dir, "stale.pid")}
			if err := remote.Upload(ctx, tr.r, strings.NewReader(strconv.Itoa(pid)+"\n1\n"), stale.Pidfile, 0o644); err != nil {
				t.Fatal(err)
			}
			wantState(t, ctx, stale, remote.Gone)
			if err := stale.Signal(ctx, syscall.SIGSTOP); !errors.Is(err, remote.ErrGone) {
				t.Errorf("signal through a stale pidfile: %v, want ErrGone", err)
			}
			if err := stale.Kill(ctx); err != nil {
				t.Errorf("kill through a stale pidfile: %v", err)
			}
			wantState(t, ctx, other, remote.Running)
			// A missing or garbled pidfile is gone too.
			for _, body := range []string{"", "not a pid\n", "-1\n"} {
				if err := remote.Upload(ctx, tr.r, strings.NewReader(body), stale.Pidfile, 0o644); err != nil {
					t.Fatal(err)
				}
				wantState(t, ctx, stale, remote.Gone)
			}
			wantState(t, ctx, remote.Proc{Remote: tr.r, Pidfile: path.Join(tr.dir, "never.pid")}, remote.Gone)
		})
	}
}

func TestStartErrors(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			pf := path.Join(tr.dir, "bad.pid")
			for _, d := range []remote.Daemon{
				{Path: "no-such-program-lockbench", Pidfile: pf},
				{Path: "sleep", Args: []string{"1"}, Pidfile: "relative.pid"},
				{Path: "", Pidfile: pf},
				{Path: "sleep", Pidfile: pf, Env: []string{"NOVALUE"}},
			} {
				if p, err := remote.Start(ctx, tr.r, d); err == nil {
					_ = p.Kill(ctx)
					t.Errorf("start of %+v worked", d)
				}
			}
			// The environment reaches the daemon, the output its log.
			p, err := remote.Start(ctx, tr.r, remote.Daemon{
				Path: "sh", Args: []string{"-c", `echo "$LB_TEST_VALUE"; exec sleep 600`},
				Env: []string{"LB_TEST_VALUE=it's here"}, Pidfile: path.Join(tr.dir, "env.pid"), Log: path.Join(tr.dir, "env.log"),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Kill(context.Background()) })
			var log bytes.Buffer
			for !strings.Contains(log.String(), "\n") && ctx.Err() == nil {
				log.Reset()
				_ = remote.Download(ctx, tr.r, path.Join(tr.dir, "env.log"), &log)
			}
			if log.String() != "it's here\n" {
				t.Errorf("log %q", log.String())
			}
		})
	}
}

// TestDetached: a daemon started over SSH outlives the connection that
// started it, and the pidfile finds it from a new one.
func TestDetached(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	lab := remotetest.New(t, 1)
	s, err := remote.DialSSH(ctx, lab.SSHConfig(0, "root"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := remote.Start(ctx, s, remote.Daemon{Path: "sleep", Args: []string{"600"}, Pidfile: "/tmp/detached/sleep.pid"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := lab.Dial(t, 0, "root")
	p = remote.Proc{Remote: s2, Pidfile: p.Pidfile}
	wantState(t, ctx, p, remote.Running)
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	wantState(t, ctx, p, remote.Gone)
}

// TestLocalDaemonSession: a daemon Local starts leads a session (and a
// process group) of its own, which its signals reach as a whole.
func TestLocalDaemonSession(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	p, err := remote.Start(ctx, remote.Local{}, remote.Daemon{Path: "sleep", Args: []string{"600"}, Pidfile: path.Join(dir, "sleep.pid")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(context.Background()) })
	pid, err := p.Pid(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ps", "-o", "sid=,pgid=", "-p", strconv.Itoa(pid)).Output()
	if f := strings.Fields(string(out)); err != nil || len(f) != 2 || f[0] != strconv.Itoa(pid) || f[1] != strconv.Itoa(pid) {
		t.Errorf("session and group of %d: %q (%v), want its own", pid, out, err)
	}
}

// TestUser: a command and a daemon run as the account asked for (its uid
// and groups), and the daemon is signalled, paused and killed by its
// pidfile all the same; a name no account can have is refused.
func TestUser(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	const account = "nobody"
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := tr.r.Run(ctx, remote.Cmd{Path: "id", Args: []string{"-un"}, User: account, Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(out.String()); got != account {
				t.Errorf("id -un as %s: %q", account, got)
			}
			dir := path.Join(tr.dir, "user")
			if err := tr.r.Run(ctx, remote.Cmd{Path: "mkdir", Args: []string{"-p", dir}}); err != nil {
				t.Fatal(err)
			}
			p, err := remote.Start(ctx, tr.r, remote.Daemon{
				Path: "sh", Args: []string{"-c", `id -un; exec sleep 600`}, User: account,
				Pidfile: path.Join(dir, "sleep.pid"), Log: path.Join(dir, "sleep.log"),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Kill(context.Background()) })
			var log bytes.Buffer
			for !strings.Contains(log.String(), "\n") && ctx.Err() == nil {
				log.Reset()
				_ = remote.Download(ctx, tr.r, path.Join(dir, "sleep.log"), &log)
			}
			if log.String() != account+"\n" {
				t.Errorf("the daemon runs as %q, want %s", log.String(), account)
			}
			pid, err := p.Pid(ctx)
			if err != nil {
				t.Fatal(err)
			}
			uid, err := remote.Output(ctx, tr.r, "stat", "-c", "%U", "/proc/"+strconv.Itoa(pid))
			if err != nil || strings.TrimSpace(string(uid)) != account {
				t.Errorf("the pidfile's process %d belongs to %q (%v), want %s", pid, uid, err, account)
			}
			if err := p.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			wantState(t, ctx, p, remote.Stopped)
			if err := p.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			wantState(t, ctx, p, remote.Gone)
			for _, bad := range []string{"-rf", "a b", "x;y", "$(id)"} {
				if err := tr.r.Run(ctx, remote.Cmd{Path: "true", User: bad}); err == nil || !strings.Contains(err.Error(), "not an account name") {
					t.Errorf("user %q: %v", bad, err)
				}
			}
		})
	}
}

// TestTree: a process whose children leave its group and session (as a
// PostgreSQL server's do) is paused, resumed and killed with them: the
// children are found by descent, not by group.
func TestTree(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			dir := path.Join(tr.dir, "tree")
			kids := path.Join(dir, "kids")
			// Two children, each in a session of its own, one with a
			// grandchild; the leader writes their pids once they run.
			p, err := remote.Start(ctx, tr.r, remote.Daemon{
				Path: "sh", Args: []string{"-c", `setsid sleep 600 & a=$!; setsid sh -c 'sleep 600 & wait' & b=$!; sleep 0.2; echo "$a $b" > "$1"; wait`, "sh", kids},
				Pidfile: path.Join(dir, "leader.pid"),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Kill(context.Background()) })
			var children []string
			for len(children) < 2 && ctx.Err() == nil {
				b, _ := remote.Output(ctx, tr.r, "sh", "-c", `cat "$1" 2>/dev/null || true`, "sh", kids)
				children = strings.Fields(string(b))
			}
			grand, err := remote.Output(ctx, tr.r, "sh", "-c", `cat /proc/"$1"/task/"$1"/children`, "sh", children[1])
			if err != nil || len(strings.Fields(string(grand))) != 1 {
				t.Fatalf("the grandchild: %q (%v)", grand, err)
			}
			all := append(children, strings.Fields(string(grand))...)
			state := func(pid string) string {
				out, _ := remote.Output(ctx, tr.r, "sh", "-c", `IFS= read -r s < "/proc/$1/stat" && set -- ${s##*) } && echo "$1"`, "sh", pid)
				return strings.TrimSpace(string(out))
			}
			if err := p.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			for _, c := range all {
				if s := state(c); s != "T" {
					t.Errorf("after Pause, %s (out of the leader's group) is in state %q, want T", c, s)
				}
			}
			if err := p.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			for _, c := range all {
				if s := state(c); s == "T" {
					t.Errorf("after Resume, %s is still stopped", c)
				}
			}
			if err := p.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			for _, c := range all {
				if living(t, ctx, tr.r, c) {
					t.Errorf("%s outlived Kill", c)
				}
			}
		})
	}
}

// TestResumeOfAProcessThatExits: a process resumed at the end of its work
// exits at once; Resume returns (nil, or ErrGone when no look found it
// running first) instead of waiting for a state it will never be in.
func TestResumeOfAProcessThatExits(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			p, err := remote.Start(ctx, tr.r, remote.Daemon{Path: "sh", Args: []string{"-c", "kill -s STOP $$; exit 0"},
				Pidfile: path.Join(tr.dir, "resume-exits.pid")})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Wait(ctx, remote.Stopped); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := p.Resume(rctx); err != nil && !errors.Is(err, remote.ErrGone) {
				t.Fatalf("resume of a process that exits: %v, want nil or ErrGone", err)
			}
			if err := p.Wait(ctx, remote.Gone); err != nil {
				t.Fatal(err)
			}
			if err := p.Wait(ctx, remote.Running); !errors.Is(err, remote.ErrGone) {
				t.Errorf("a wait for a gone process to run: %v, want ErrGone", err)
			}
		})
	}
}
