package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Local is this machine as a Remote, optionally inside a network
// namespace: what the control node does to servers it runs itself. Its
// commands and daemons are child processes that get SIGKILL when this
// process dies, however it dies (a parent-death signal), so a killed run
// leaves none behind. The zero value runs here, named "local".
type Local struct {
	// Host names it; "" is "local".
	Host string
	// Netns, when set, is a network namespace (NewNetns, or an open
	// /proc/PID/ns/net) in which every command and daemon starts: a cut
	// then changes that namespace's rules, not this machine's.
	Netns *os.File
	// Keep are addresses a Cut here must not cut (the judge's).
	Keep []netip.Addr
}

var (
	_ Remote = Local{}
	_ Keeper = Local{}
)

// Kept is Keep.
func (l Local) Kept() []netip.Addr { return l.Keep }

// Name names the host.
func (l Local) Name() string {
	if l.Host == "" {
		return "local"
	}
	return l.Host
}

// Close does nothing: the daemons Local started die with this process.
func (l Local) Close() error { return nil }

// Dial connects to addr from this machine, or from inside Netns when it
// is set (the socket belongs to that namespace).
func (l Local) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := InNetns(l.Netns, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("remote: %s: %w", l.Name(), err)
	}
	return c, nil
}

// lookPath finds a program as a host's login would, adding /usr/sbin and
// /sbin, which a non-login PATH may lack.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil || filepath.IsAbs(name) {
		return p, err
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p, err2 := exec.LookPath(filepath.Join(dir, name)); err2 == nil {
			return p, nil
		}
	}
	return "", err
}

// Run runs c as a child process, in its own process group, which ctx's
// end kills as a whole.
func (l Local) Run(ctx context.Context, c Cmd) error {
	if err := checkEnv(c.Env); err != nil {
		return err
	}
	line := commandLine(c.Path, c.Args)
	path, err := lookPath(c.Path)
	if err != nil {
		return fmt.Errorf("remote: %s: %w", l.Name(), err)
	}
	cmd := exec.CommandContext(ctx, path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	cmd.Stdin, cmd.Stdout = c.Stdin, c.Stdout
	var tail tailBuffer
	cmd.Stderr = &tail
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(c.Stderr, &tail)
	}
	cred, err := credential(c.User)
	if err != nil {
		return fmt.Errorf("remote: %s: %s: %w", l.Name(), line, err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child the command left holding its output ends with the group
	// when ctx does; otherwise Wait gives up on it after this.
	cmd.WaitDelay = 5 * time.Second
	if err := InNetns(l.Netns, cmd.Start); err != nil {
		return fmt.Errorf("remote: %s: %s: %w", l.Name(), line, err)
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("remote: %s: %s: %w", l.Name(), line, ctx.Err())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		e := &ExitError{Host: l.Name(), Command: line, Code: exit.ExitCode(), Stderr: tail.String()}
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal().String()
		}
		return e
	}
	if err != nil {
		return fmt.Errorf("remote: %s: %s: %w", l.Name(), line, err)
	}
	return nil
}

// Spawn starts d's program as a child process in a session of its own
// that dies with this process, writes its pidfile, and reaps it when it
// exits.
func (l Local) Spawn(ctx context.Context, d Daemon) (err error) {
	if err := checkEnv(d.Env); err != nil {
		return err
	}
	fail := func(err error) error {
		return fmt.Errorf("remote: start %s on %s: %w", commandLine(d.Path, d.Args), l.Name(), err)
	}
	path, err := lookPath(d.Path)
	if err != nil {
		return fail(err)
	}
	cred, err := credential(d.User)
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(filepath.Dir(d.Pidfile), 0o755); err != nil {
		return fail(err)
	}
	cmd := exec.Command(path, d.Args...)
	cmd.Env = append(os.Environ(), d.Env...)
	cmd.Dir = d.Dir
	if d.Log != "" {
		log, err := os.OpenFile(d.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fail(err)
		}
		defer log.Close() // the child has its own descriptor
		cmd.Stdout, cmd.Stderr = log, log
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := InNetns(l.Netns, cmd.Start); err != nil {
		return fail(err)
	}
	pid := cmd.Process.Pid
	// Not yet reaped, the process (a zombie at worst) still has its start
	// time, and its pid cannot have been reused.
	t0, err := startTime(pid)
	if err == nil {
		err = writePidfile(d.Pidfile, pid, t0)
	}
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fail(err)
	}
	go reap(cmd)
	return nil
}

// reap waits for a daemon Spawn started, so that it never stays a zombie;
// its state is read by its pidfile, not from here. Named, so that a leak
// check can tell a running daemon's reaper from a leak.
func reap(cmd *exec.Cmd) { _ = cmd.Wait() }

// credential is the uid, primary group and groups of the account name,
// for a process started as it; nil for "".
func credential(name string) (*syscall.Credential, error) {
	if err := checkUser(name); err != nil || name == "" {
		return nil, err
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("run as %s: %w", name, err)
	}
	id := func(s string) (uint32, error) {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("run as %s: id %q: %w", name, s, err)
		}
		return uint32(n), nil
	}
	c := &syscall.Credential{}
	if c.Uid, err = id(u.Uid); err != nil {
		return nil, err
	}
	if c.Gid, err = id(u.Gid); err != nil {
		return nil, err
	}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("run as %s: its groups: %w", name, err)
	}
	for _, g := range gids {
		n, err := id(g)
		if err != nil {
			return nil, err
		}
		c.Groups = append(c.Groups, n)
	}
	return c, nil
}

// startTime is field 22 of /proc/PID/stat: when the process started, in
// clock ticks since boot.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	return string(f[19]), nil
}

// writePidfile writes pid and start time to path, whole or not at all.
func writePidfile(path string, pid int, t0 string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d\n%s\n", pid, t0), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
