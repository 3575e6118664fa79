package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path"
	"strconv"
	"strings"
)

// Remote is one host as the control node reaches it: Jepsen's remote
// (connect, execute, upload, download) with a way to start a process that
// outlives the call. Faults and server starts are written against it
// (through Start, Proc, Upload, Download, Cut and Heal), so they work
// alike on this machine and over SSH. Implementations are safe for
// concurrent use.
type Remote interface {
	// Name names the host in logs, errors and results.
	Name() string
	// Run runs c on the host and waits for it to end. A command that
	// exits non-zero returns an *ExitError. When ctx ends the command is
	// killed and Run returns an error wrapping ctx.Err().
	Run(ctx context.Context, c Cmd) error
	// Spawn starts d's program detached from the call: in a session (and
	// so a process group) of its own, stdin from /dev/null, output
	// appended to d.Log. Before it returns it writes d.Pidfile: the pid on
	// the first line, the process's start time (field 22 of
	// /proc/PID/stat) on the second. Use Start, which refuses a pidfile
	// whose process still lives, rather than Spawn.
	Spawn(ctx context.Context, d Daemon) error
	// Dial connects to addr (host:port, "tcp") as the host itself would:
	// an address on the host's loopback is that host's loopback. Over SSH
	// it is a direct-tcpip channel of the connection (sshd must allow TCP
	// forwarding, as it does by default), so a service that listens on
	// the host's loopback only — a proxy's control API — is reached from
	// the control node without being open to the network.
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	// Close releases the connection. Processes it started keep running
	// (on this machine, Local's die with this process).
	Close() error
}

// Cmd is a command to run on a host.
type Cmd struct {
	// Path is the program: a path, or a name looked up on the host's
	// PATH, to which /usr/sbin and /sbin are added (where ip lives).
	Path string
	// Args are the arguments after the program's name. They may appear
	// in errors and on the host's process list: pass secrets in Env.
	Args []string
	// Env holds KEY=VALUE pairs added to the host's environment. The
	// values never appear on a command line or in an error.
	Env []string
	// Dir is the working dir; "" is the login's (or this process's).
	Dir string
	// User, when set, is the account the command runs as (its uid, its
	// primary group and its groups), which the login must be root (or
	// sudo) to take; "" runs it as root. Servers that refuse root
	// (PostgreSQL) run as their own account.
	User string
	// Stdin, Stdout and Stderr are the command's; nil means empty input
	// and discarded output.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Daemon is a long-lived process to start with Start.
type Daemon struct {
	// Path, Args, Env, Dir and User are as in Cmd.
	Path string
	Args []string
	Env  []string
	Dir  string
	User string
	// Pidfile is where its pid goes: an absolute path on the host, whose
	// dir Start creates.
	Pidfile string
	// Log receives its stdout and stderr, appended; "" discards them.
	Log string
}

// ExitError is a command that ran and exited non-zero, or was killed by a
// signal.
type ExitError struct {
	// Host is the host's name.
	Host string
	// Command is the program and its arguments (never its Env).
	Command string
	// Code is the exit status; -1 when a signal ended the command.
	Code int
	// Signal names the signal that ended it, if one did.
	Signal string
	// Stderr is the end of what it wrote to stderr.
	Stderr string
}

// Error says which command failed on which host, how, and the end of its
// stderr.
func (e *ExitError) Error() string {
	how := "exit status " + strconv.Itoa(e.Code)
	if e.Signal != "" {
		how = "killed by signal " + e.Signal
	}
	msg := fmt.Sprintf("remote: %s: %s: %s", e.Host, e.Command, how)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

// stderrTail is how much of a failed command's stderr an ExitError keeps.
const stderrTail = 2048

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - stderrTail; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// commandLine is c's program and arguments as an error shows them.
func commandLine(path string, args []string) string {
	words := []string{path}
	for _, a := range args {
		if strings.Contains(a, "\n") {
			// A script's body (sh -c BODY lockbench-NAME …): its name,
			// the next word, says which; an error quoting the whole
			// body was pages long.
			a = "<script>"
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// asUser is the command that runs the rest of a command line as user
// (uid, primary group, groups), with setpriv (util-linux), which needs no
// PAM session and leaves the process's pid as it is: "" runs it as it is.
const asUser = `lb_as() { [ -z "$LB_USER" ] || { g=$(id -g -- "$LB_USER") || exit 126; set -- setpriv --reuid="$LB_USER" --regid="$g" ` +
	`--init-groups -- "$@"; }; unset LB_USER; exec "$@"; }`

// checkUser rejects a user name a shell or setpriv could take for
// something else.
func checkUser(u string) error {
	if u == "" {
		return nil
	}
	for i, r := range u {
		switch {
		case r == '_', r == '.', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case r == '-' && i > 0:
		default:
			return fmt.Errorf("remote: user %q: not an account name", u)
		}
	}
	return nil
}

// checkEnv rejects an Env entry that is no KEY=VALUE pair or whose value
// holds a newline (values travel one per line), naming the key only.
func checkEnv(env []string) error {
	for i, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !validName(k) {
			return fmt.Errorf("remote: Env[%d]: want KEY=VALUE with KEY a shell variable name, got a string with no such key", i)
		}
		if strings.ContainsAny(v, "\n\x00") {
			return fmt.Errorf("remote: Env %s: its value holds a newline or NUL", k)
		}
	}
	return nil
}

// validName reports whether k can be a shell variable's name.
func validName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// quote returns s quoted for a POSIX shell, as one word.
func quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '=' || r == ',' || r == '+' || r == '@' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Output runs path with args on r and returns its stdout.
func Output(ctx context.Context, r Remote, path string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := r.Run(ctx, Cmd{Path: path, Args: args, Stdout: &out})
	return out.Bytes(), err
}

// script runs a shell script on r with args as $1, $2, …
func script(ctx context.Context, r Remote, name, body string, stdout io.Writer, args ...string) error {
	return r.Run(ctx, Cmd{Path: "sh", Args: append([]string{"-c", body, "lockbench-" + name}, args...), Stdout: stdout})
}

// scriptOutput runs a shell script on r and returns its stdout, trimmed.
func scriptOutput(ctx context.Context, r Remote, name, body string, args ...string) (string, error) {
	var out bytes.Buffer
	err := script(ctx, r, name, body, &out, args...)
	return strings.TrimSpace(out.String()), err
}

// Upload writes what src holds to the file dst on r, with mode, creating
// its dir. The file appears whole or not at all, and nobody else reads it
// before it has its mode: it is written beside dst, private, and renamed
// over it.
func Upload(ctx context.Context, r Remote, src io.Reader, dst string, mode fs.FileMode) error {
	if !path.IsAbs(dst) {
		return fmt.Errorf("remote: upload to %s: %q is not an absolute path", r.Name(), dst)
	}
	// Dirs it makes are open to other users (a server may run as one);
	// the file is private until it has its mode.
	const body = `set -e
umask 022
mkdir -p -- "$(dirname -- "$1")"
umask 077
t="$1.lockbench-upload.$$"
trap 'rm -f -- "$t"' EXIT
cat > "$t"
chmod "$2" "$t"
mv -f -- "$t" "$1"
trap - EXIT`
	err := r.Run(ctx, Cmd{Path: "sh", Args: []string{"-c", body, "lockbench-upload", dst, strconv.FormatUint(uint64(mode.Perm()), 8)},
		Stdin: src})
	if err != nil {
		return fmt.Errorf("remote: upload to %s:%s: %w", r.Name(), dst, err)
	}
	return nil
}

// Download copies the file src on r to dst.
func Download(ctx context.Context, r Remote, src string, dst io.Writer) error {
	if err := r.Run(ctx, Cmd{Path: "cat", Args: []string{"--", src}, Stdout: dst}); err != nil {
		return fmt.Errorf("remote: download %s:%s: %w", r.Name(), src, err)
	}
	return nil
}

// IsExit reports whether err is a command's non-zero exit, and which.
func IsExit(err error) (*ExitError, bool) {
	var e *ExitError
	ok := errors.As(err, &e)
	return e, ok
}
