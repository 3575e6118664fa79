package remote

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrBroken is wrapped by the errors of a Remote whose connection to its
// host has broken: the host may still run what it was told to.
var ErrBroken = errors.New("connection to the host lost")

// SSHConfig says how to reach a host over SSH.
type SSHConfig struct {
	// Name names the host in logs and errors; "" is Addr.
	Name string
	// Addr is the host's sshd: host or host:port (port 22 if none).
	Addr string
	// User is the login. When it is not root every command runs through
	// `sudo -n`, which must not ask for a password.
	User string
	// IdentityFiles are private key files (not encrypted, not open to
	// others: an encrypted key belongs in the agent).
	IdentityFiles []string
	// Agent offers the keys of the ssh agent at AgentSocket, or at
	// $SSH_AUTH_SOCK when that is "".
	Agent       bool
	AgentSocket string
	// HostKeys pins the host's key: a key ("ssh-ed25519 AAAA…") or a
	// known_hosts line each. When none is given the host's key must be in
	// KnownHosts.
	HostKeys []string
	// KnownHosts are known_hosts files; none means ~/.ssh/known_hosts.
	KnownHosts []string
	// Timeout bounds the connection and the handshake; 0 is 15 s.
	Timeout time.Duration
	// KeepAlive is how often the connection is probed; a probe left
	// unanswered for three times as long breaks it (ErrBroken, Done), as
	// OpenSSH's ServerAliveCountMax does. 0 is 5 s; negative turns the
	// probes off.
	KeepAlive time.Duration
	// Keep are addresses the host must keep reaching whatever Cut is
	// told (the judge's); the control node's is kept anyway.
	Keep []netip.Addr
	// MaxSessions bounds the commands run at once on the connection (sshd
	// allows 10 by default); 0 is 8.
	MaxSessions int
}

// SSH is a host reached over SSH. Its commands run under sudo when its
// user is not root.
type SSH struct {
	name, addr, user string
	root             bool
	client           *ssh.Client
	keys             *keySource
	control          netip.Addr
	keep             []netip.Addr
	hostKey          ssh.PublicKey
	sessions         chan struct{}

	done      chan struct{} // closed when the connection has ended
	closing   chan struct{} // closed by Close
	closeOnce sync.Once
	mu        sync.Mutex
	broken    error // why the connection ended, when Close did not end it
}

var (
	_ Remote = (*SSH)(nil)
	_ Keeper = (*SSH)(nil)
)

// DialSSH connects to a host, verifies its host key (an unknown or changed
// key is a *HostKeyError naming the host), logs in with the keys
// configured and finds out whether its user is root.
func DialSSH(ctx context.Context, cfg SSHConfig) (_ *SSH, err error) {
	addr := cfg.Addr
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), "22")
	}
	name := cmp.Or(cfg.Name, cfg.Addr)
	if cfg.User == "" {
		return nil, fmt.Errorf("remote: %s: no user to log in as", name)
	}
	hk, err := newHostKeyCheck(&cfg, name, addr)
	if err != nil {
		return nil, err
	}
	keys, err := newKeySource(&cfg)
	if err != nil {
		return nil, fmt.Errorf("%w (host %s)", err, name)
	}
	defer func() {
		if err != nil {
			keys.close()
		}
	}()
	timeout := cmp.Or(cfg.Timeout, 15*time.Second)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remote: %s: %w", name, err)
	}
	// The handshake has no context: the connection's deadline bounds it,
	// and closing the connection ends it early when ctx does.
	_ = conn.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, &ssh.ClientConfig{
		User:              cfg.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeysCallback(keys.signers)},
		HostKeyCallback:   hk.verify,
		HostKeyAlgorithms: hk.algorithms(addr, conn.RemoteAddr()),
	})
	if !stop() && err == nil {
		c.Close()
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		var hkErr *HostKeyError
		if errors.As(err, &hkErr) {
			return nil, hkErr
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return nil, fmt.Errorf("remote: %s: ssh %s@%s: %w", name, cfg.User, addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	s := &SSH{
		name: name, addr: addr, user: cfg.User,
		client: ssh.NewClient(c, chans, reqs), keys: keys, hostKey: hk.verified, keep: cfg.Keep,
		sessions: make(chan struct{}, cmp.Or(cfg.MaxSessions, 8)),
		done:     make(chan struct{}), closing: make(chan struct{}),
	}
	if ap, err := netip.ParseAddrPort(conn.LocalAddr().String()); err == nil {
		s.control = ap.Addr().Unmap()
	}
	go s.watch()
	if ka := cmp.Or(cfg.KeepAlive, 5*time.Second); ka > 0 {
		go s.keepAlive(ka)
	}
	out, err := s.run(ctx, Cmd{Path: "id", Args: []string{"-u"}}, false)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("remote: %s: id -u: %w", name, err)
	}
	s.root = strings.TrimSpace(out) == "0"
	return s, nil
}

// Name names the host.
func (s *SSH) Name() string { return s.name }

// User is the login.
func (s *SSH) User() string { return s.user }

// Root reports whether the login is root; when it is not, every command
// runs through `sudo -n`.
func (s *SSH) Root() bool { return s.root }

// HostKey is the key the host presented, verified.
func (s *SSH) HostKey() ssh.PublicKey { return s.hostKey }

// ControlAddr is this control node's address as the host sees it.
func (s *SSH) ControlAddr() netip.Addr { return s.control }

// Kept is what a Cut on the host must not cut: ControlAddr, and
// SSHConfig.Keep.
func (s *SSH) Kept() []netip.Addr { return append([]netip.Addr{s.control}, s.keep...) }

// Done is closed when the connection has ended: by Close, or broken.
func (s *SSH) Done() <-chan struct{} { return s.done }

// Err is nil while the connection lives or after Close; after a break it
// wraps ErrBroken.
func (s *SSH) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

// Close ends the connection. The processes started on the host keep
// running.
func (s *SSH) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	err := s.client.Close()
	<-s.done
	s.keys.close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// watch closes done when the connection ends, recording why unless Close
// ended it.
func (s *SSH) watch() {
	err := s.client.Wait()
	select {
	case <-s.closing:
	default:
		s.mu.Lock()
		if s.broken == nil { // keepAlive may have said why already
			s.broken = fmt.Errorf("remote: %s: %w: %v", s.name, ErrBroken, err)
		}
		s.mu.Unlock()
	}
	close(s.done)
}

// keepAlive sends a keepalive request every d, and breaks the connection
// when one gets no answer within 3d: a host cut off from the control node
// otherwise leaves each command waiting for TCP to give up, for minutes.
func (s *SSH) keepAlive(d time.Duration) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		answered := make(chan struct{})
		go func() {
			_, _, _ = s.client.SendRequest("keepalive@openssh.com", true, nil)
			close(answered)
		}()
		select {
		case <-answered:
		case <-s.done:
			return
		case <-time.After(3 * d):
			s.mu.Lock()
			s.broken = fmt.Errorf("remote: %s: %w: no answer to a keepalive in %v", s.name, ErrBroken, 3*d)
			s.mu.Unlock()
			s.client.Close()
			<-answered
			return
		}
	}
}

// wrapper runs a command on the host: it says on stderr which process
// group it runs in (so that a command whose ctx ends can be killed: sshd
// does not pass signals to a root login's commands), exports the
// KEY=VALUE lines it reads from stdin up to an empty line (so values never
// appear on a command line), moves to the dir in $1 and execs the rest.
const wrapper = `lb_pgid() { IFS= read -r s < /proc/self/stat; set -- ${s##*) }; echo "` + pgidMark + `$3" >&2; }
lb_pgid
while IFS= read -r lb_env && [ -n "$lb_env" ]; do export "$lb_env"; done
unset lb_env
PATH=$PATH:/usr/sbin:/sbin
` + asUser + `
[ -z "$1" ] || cd -- "$1" || exit 126
LB_USER=$2
shift 2
lb_as "$@"`

// pgidMark starts the line of the wrapper's stderr that names its group.
const pgidMark = "lockbench-pgid "

// Run runs c on the host through the wrapper, under sudo unless the user
// is root.
func (s *SSH) Run(ctx context.Context, c Cmd) error {
	return s.runCmd(ctx, c, true)
}

// run runs c and returns its stdout (when c.Stdout is nil).
func (s *SSH) run(ctx context.Context, c Cmd, sudo bool) (string, error) {
	var out bytes.Buffer
	if c.Stdout == nil {
		c.Stdout = &out
	}
	err := s.runCmd(ctx, c, sudo)
	return out.String(), err
}

func (s *SSH) runCmd(ctx context.Context, c Cmd, sudo bool) error {
	if err := checkEnv(c.Env); err != nil {
		return err
	}
	if err := checkUser(c.User); err != nil {
		return err
	}
	line := commandLine(c.Path, c.Args)
	fail := func(err error) error { return fmt.Errorf("remote: %s: %s: %w", s.name, line, err) }
	select {
	case s.sessions <- struct{}{}:
		defer func() { <-s.sessions }()
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-s.done:
		return fail(s.lost())
	}
	sess, err := s.client.NewSession()
	if err != nil {
		if s.Err() != nil || isClosed(s.done) {
			return fail(s.lost())
		}
		return fail(err)
	}
	defer sess.Close()
	var env strings.Builder
	for _, kv := range c.Env {
		env.WriteString(kv + "\n")
	}
	env.WriteString("\n")
	stdin := c.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	sess.Stdin = io.MultiReader(strings.NewReader(env.String()), stdin)
	sess.Stdout = c.Stdout
	var tail tailBuffer
	var stderr io.Writer = &tail
	if c.Stderr != nil {
		stderr = io.MultiWriter(c.Stderr, &tail)
	}
	pg := &pgidWriter{w: stderr}
	sess.Stderr = pg
	words := []string{"sh", "-c", wrapper, "lockbench", c.Dir, c.User, c.Path}
	if sudo && !s.root {
		words = append([]string{"sudo", "-n", "--"}, words...)
	}
	words = append(words, c.Args...)
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = quote(w)
	}
	if err := sess.Start(strings.Join(quoted, " ")); err != nil {
		return fail(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		s.kill(pg.pgid())
		sess.Close()
		<-waited
		return fail(ctx.Err())
	}
	var exit *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		e := &ExitError{Host: s.name, Command: line, Code: exit.ExitStatus(), Signal: exit.Signal(), Stderr: tail.String()}
		if e.Signal != "" {
			e.Code = -1
		}
		return e
	case errors.As(err, &missing), isClosed(s.done):
		return fail(s.lost())
	}
	return fail(err)
}

// kill kills the process group of a command whose ctx has ended, from a
// session of its own. OpenSSH refuses a signal request for a root login's
// session, and closing the channel does not end the command.
func (s *SSH) kill(pgid int) {
	if pgid <= 1 {
		return // the wrapper had not said: it had not started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := strconv.Itoa(pgid)
	_ = s.runCmd(ctx, Cmd{Path: "sh", Args: []string{"-c", `kill -s KILL -- "-$1"`, "lockbench-kill", g}}, true)
}

// pgidWriter passes a command's stderr on, less the wrapper's line naming
// its process group, which it keeps.
type pgidWriter struct {
	w     io.Writer
	mu    sync.Mutex
	line  []byte // the start of a line not yet passed on, while looking
	found bool
	group int
}

func (p *pgidWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for !p.found && len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.line = append(p.line, b...)
			if len(p.line) > 4096 { // not the wrapper: give up looking
				p.found = true
				_, err := p.w.Write(p.line)
				return n, err
			}
			return n, nil
		}
		line := append(p.line, b[:i+1]...)
		p.line, b = nil, b[i+1:]
		if g, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(pgidMark)); ok {
			p.group, _ = strconv.Atoi(string(g))
			p.found = true
			break
		}
		// Something the login printed before the wrapper ran.
		if _, err := p.w.Write(line); err != nil {
			return n, err
		}
	}
	if len(b) > 0 {
		if _, err := p.w.Write(b); err != nil {
			return n, err
		}
	}
	return n, nil
}

func (p *pgidWriter) pgid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.group
}

// lost is why a command could not finish: the connection broke, or was
// closed.
func (s *SSH) lost() error {
	if err := s.Err(); err != nil {
		return err
	}
	select {
	case <-s.closing:
		return errors.New("remote: the connection is closed")
	default:
		return fmt.Errorf("remote: %s: %w", s.name, ErrBroken)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Spawn starts d with setsid through a shell, detached from the session
// (see Remote).
func (s *SSH) Spawn(ctx context.Context, d Daemon) error { return spawnShell(ctx, s, d) }

// Dial connects to addr as the host does, through a direct-tcpip channel
// of the connection: sshd on the host makes the connection, so the host's
// loopback is reachable. A broken link fails with ErrBroken.
func (s *SSH) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := s.client.DialContext(ctx, network, addr)
	if err != nil {
		if isClosed(s.done) {
			return nil, s.lost()
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("remote: %s: dial %s: %w", s.name, addr, ctx.Err())
		}
		return nil, fmt.Errorf("remote: %s: dial %s: %w", s.name, addr, err)
	}
	return c, nil
}

// String is the host's name and login, for logs.
func (s *SSH) String() string {
	who := s.user
	if !s.root {
		who += " (sudo)"
	}
	return s.name + " as " + who + " at " + s.addr
}
