//go:build go1.25

// The tests need Go 1.25 (sync.WaitGroup.Go, strings.SplitSeq, range over
// functions); the library itself builds from Go 1.22 (see go.mod).

package redlock_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The library's tests start plain redis-server processes themselves, so
// that the library module needs nothing of the benchmark around it. Tests
// that need the benchmark's faults (proxies, partitions, latency) live in
// backends/redlockbackend.

// redisOptions says how startServers starts each server.
type redisOptions struct {
	// Durable makes the server write an append-only file it fsyncs on
	// every write, so that Restart(ctx, true) finds every write.
	Durable bool
	// Config is extra configuration, each entry a directive and its
	// arguments ({"maxmemory", "64mb"}).
	Config [][]string
}

// server is one redis-server process a test started, on a port of its
// own below the ephemeral range and in a dir of its own.
type server struct {
	Name string // redis-N, for messages
	port int
	dir  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// serverStartTimeout bounds how long a server may take to answer PING.
const serverStartTimeout = 30 * time.Second

// startsServers skips tb under -short: the test needs redis-server.
func startsServers(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts redis-server: skipped under -short (make unit)")
	}
}

// serverEnv is where a test starts its servers (forTest).
type serverEnv struct{ tb testing.TB }

// forTest returns the place tb starts Redis servers from: each it starts
// is killed when tb ends. Under -short it skips tb.
func forTest(tb testing.TB) serverEnv {
	tb.Helper()
	startsServers(tb)
	return serverEnv{tb}
}

// Redis starts n Redis servers, killed when the test ends.
func (e serverEnv) Redis(_ context.Context, n int, o redisOptions) ([]*server, error) {
	e.tb.Helper()
	return startServers(e.tb, n, o), nil
}

// startServers starts n Redis servers for tb, killed when tb ends. Under
// -short it skips tb.
func startServers(tb testing.TB, n int, o redisOptions) []*server {
	tb.Helper()
	startsServers(tb)
	servers, err := launch(tb.TempDir(), n, o)
	for _, s := range servers {
		tb.Cleanup(func() {
			if tb.Failed() {
				tb.Logf("--- redis-server %s log (tail) ---\n%s", s.Addr(), s.logTail(2048))
			}
			s.Kill()
		})
	}
	if err != nil {
		tb.Fatal(err)
	}
	return servers
}

// launch starts n servers under dir, each in a subdir of its own. On an
// error it returns the servers it started, for the caller to kill.
func launch(dir string, n int, o redisOptions) ([]*server, error) {
	var servers []*server
	for i := range n {
		s := &server{Name: fmt.Sprintf("redis-%d", i), dir: filepath.Join(dir, fmt.Sprintf("redis-%d", i))}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return servers, err
		}
		var err error
		for try := 0; try < 20; try++ {
			// A port another process took between our check and the
			// server's bind fails the start: take another one.
			s.port = freePort()
			s.args = serverArgs(s.port, s.dir, o)
			if err = s.start(); err == nil {
				break
			}
		}
		if err != nil {
			return servers, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// freePort returns a port below the ephemeral range (32768–60999) that
// nothing listens on now.
func freePort() int {
	for {
		p := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			l.Close()
			return p
		}
	}
}

func serverArgs(port int, dir string, o redisOptions) []string {
	args := []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--daemonize", "no", "--protected-mode", "no", "--save", "",
		"--logfile", "", "--maxclients", "10000",
	}
	if o.Durable {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	for _, c := range o.Config {
		args = append(args, append([]string{"--" + c[0]}, c[1:]...)...)
	}
	return args
}

// Addr returns the address clients dial.
func (s *server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// ServerAddr returns the server's own address: Addr, as no proxy stands
// in front of it.
func (s *server) ServerAddr() string { return s.Addr() }

// start runs the server and waits until it answers PING; it fails when
// the process exits first (its port was taken).
func (s *server) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("redis-server", s.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start redis-server on port %d: %w", s.port, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	deadline := time.Now().Add(serverStartTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !s.pong() {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start:\n%s", s.port, s.logTail(1024))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d: no PONG within %v", s.port, serverStartTimeout)
		}
	}
	return nil
}

// pong reports whether the server answers PING.
func (s *server) pong() bool {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// signal sends sig to the server and, unless it is SIGSTOP or SIGCONT,
// waits for it to exit.
func (s *server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("redis-server on port %d: not started", s.port)
	}
	select {
	case <-exited:
		if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
			return nil
		}
		return fmt.Errorf("redis-server on port %d: not running", s.port)
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		if sig == syscall.SIGTERM {
			syscall.Kill(cmd.Process.Pid, syscall.SIGCONT) // a paused server handles SIGTERM only when it runs
		}
		<-exited
	}
	return nil
}

// Kill kills the server (SIGKILL) and waits for it to exit.
func (s *server) Kill() error { return s.signal(syscall.SIGKILL) }

// Stop stops the server with SIGTERM, and waits for it to exit.
func (s *server) Stop() error { return s.signal(syscall.SIGTERM) }

// Restart kills the server and starts it again on the same port. With
// keepData false its dir is wiped first, so it comes back empty.
func (s *server) Restart(_ context.Context, keepData bool) error {
	if err := s.Kill(); err != nil {
		return err
	}
	if !keepData {
		if err := os.RemoveAll(s.dir); err != nil {
			return err
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return err
		}
	}
	return s.start()
}

// Pause stops the server with SIGSTOP and returns once every thread of it
// has stopped.
func (s *server) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		running, err := runningThreads(pid)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server %d: %d threads still running after SIGSTOP", pid, running)
		}
		<-tick.C
	}
}

// Resume continues a paused server (SIGCONT).
func (s *server) Resume() error { return s.signal(syscall.SIGCONT) }

// runningThreads counts the threads of process pid that are neither
// stopped nor dead.
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
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return 0, fmt.Errorf("%s/%s/stat: cannot parse %q", dir, t.Name(), b)
		}
		switch b[i+2] {
		case 'T', 't', 'Z', 'X', 'x':
		default:
			running++
		}
	}
	return running, nil
}

// logTail returns the last n bytes of the server's log.
func (s *server) logTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
