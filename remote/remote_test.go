package remote_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"net"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// transport is one way of reaching a host, with a dir of its own there.
type transport struct {
	name string
	r    remote.Remote
	dir  string
}

// transports are this machine (Local) and, unless -short, a simulated
// host over SSH as root and as a user who goes through sudo.
func transports(t *testing.T) []transport {
	t.Helper()
	ts := []transport{{name: "local", r: remote.Local{}, dir: t.TempDir()}}
	if testing.Short() || remotetest.Available() != nil {
		t.Log("simulated hosts unavailable (-short, or not root): this machine only")
		return ts
	}
	lab := remotetest.New(t, 1)
	ts = append(ts, transport{name: "ssh-root", r: lab.Dial(t, 0, "root"), dir: "/tmp/ssh-root"})
	if remotetest.SudoAvailable() {
		ts = append(ts, transport{name: "ssh-sudo", r: lab.Dial(t, 0, remotetest.Sudoer), dir: "/tmp/ssh-sudo"})
	} else {
		t.Log("sudo is not installed: no test through sudo")
	}
	return ts
}

// noLeaks checks, when t ends, that t's goroutines have ended.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestRun(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			secret := `s3cr'et "value" $HOME; rm -rf /`
			var out, errOut bytes.Buffer
			err := tr.r.Run(ctx, remote.Cmd{
				Path:   "sh",
				Args:   []string{"-c", `mkdir -p "$1" && cd "$1" && pwd && printf '%s\n' "$SECRET" && cat && echo oops >&2`, "sh", tr.dir},
				Env:    []string{"SECRET=" + secret},
				Stdin:  strings.NewReader("from stdin\n"),
				Stdout: &out, Stderr: &errOut,
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := tr.dir + "\n" + secret + "\nfrom stdin\n"; out.String() != want {
				t.Errorf("stdout %q, want %q", out.String(), want)
			}
			if errOut.String() != "oops\n" {
				t.Errorf("stderr %q, want oops", errOut.String())
			}

			// Dir, and a program found with /usr/sbin added to PATH.
			out.Reset()
			if err := tr.r.Run(ctx, remote.Cmd{Path: "sh", Args: []string{"-c", "pwd; command -v ip"}, Dir: tr.dir, Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || lines[0] != tr.dir || !strings.HasSuffix(lines[1], "/ip") {
				t.Errorf("pwd and ip: %q", out.String())
			}

			// A failure: exit status, stderr, never the environment.
			err = tr.r.Run(ctx, remote.Cmd{Path: "sh", Args: []string{"-c", "echo broken >&2; exit 7"}, Env: []string{"SECRET=" + secret}})
			var exit *remote.ExitError
			if !errors.As(err, &exit) || exit.Code != 7 || !strings.Contains(exit.Stderr, "broken") {
				t.Fatalf("exit 7: %#v (%v)", exit, err)
			}
			if strings.Contains(err.Error(), "s3cr") || !strings.Contains(err.Error(), tr.r.Name()) {
				t.Errorf("the error shows the secret or not the host: %v", err)
			}
			if err := tr.r.Run(ctx, remote.Cmd{Path: "no-such-program-lockbench"}); err == nil {
				t.Error("a missing program ran")
			}
			if err := tr.r.Run(ctx, remote.Cmd{Path: "true", Env: []string{"1BAD=x"}}); err == nil || strings.Contains(err.Error(), "1BAD=x") {
				t.Errorf("bad env entry: %v", err)
			}

			// ctx's end ends the command.
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err = tr.r.Run(short, remote.Cmd{Path: "sleep", Args: []string{"60"}})
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 30*time.Second {
				t.Errorf("sleep 60 under a 300 ms deadline: %v after %v", err, time.Since(start))
			}
		})
	}
}

func TestUploadDownload(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	data := make([]byte, 1<<20+3)
	rand.Read(data)
	for i := range 256 {
		data[i] = byte(i)
	}
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			dst := path.Join(tr.dir, "sub", "dir", "blob")
			if err := remote.Upload(ctx, tr.r, bytes.NewReader(data), dst, 0o640); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := remote.Download(ctx, tr.r, dst, &got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("downloaded %d bytes, differing from the %d uploaded", got.Len(), len(data))
			}
			mode, err := remote.Output(ctx, tr.r, "stat", "-c", "%a", dst, path.Dir(dst))
			if err != nil || strings.Join(strings.Fields(string(mode)), " ") != "640 755" {
				t.Errorf("modes of the file and its new dir %q (%v), want 640 755", mode, err)
			}
			// Over an existing file, whole.
			if err := remote.Upload(ctx, tr.r, strings.NewReader("small"), dst, fs.FileMode(0o755)); err != nil {
				t.Fatal(err)
			}
			got.Reset()
			if err := remote.Download(ctx, tr.r, dst, &got); err != nil || got.String() != "small" {
				t.Errorf("after the second upload: %q, %v", got.String(), err)
			}
			if err := remote.Download(ctx, tr.r, path.Join(tr.dir, "missing"), &got); err == nil || !strings.Contains(err.Error(), "missing") {
				t.Errorf("download of a missing file: %v", err)
			}
			if err := remote.Upload(ctx, tr.r, strings.NewReader("x"), "relative/path", 0o644); err == nil {
				t.Error("upload to a relative path worked")
			}
		})
	}
}

// TestDial reaches a server that listens on the host's loopback only
// through the host's Dial — over SSH a direct-tcpip channel, as the
// control node reaches a proxy's API beside a placed server — and a
// closed port there fails.
func TestDial(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server: skipped under -short (make unit)")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip(err)
	}
	noLeaks(t)
	ctx := testCtx(t)
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			port := loopbackPort(t)
			p, err := remote.Start(ctx, tr.r, remote.Daemon{Path: bin, Args: []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"},
				Pidfile: path.Join(tr.dir, "dial.pid")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Kill(context.Background()) })
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			var c net.Conn
			for {
				if c, err = tr.r.Dial(ctx, "tcp", "127.0.0.1:"+port); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("dial 127.0.0.1:%s on %s: %v", port, tr.r.Name(), err)
				case <-tick.C:
				}
			}
			defer c.Close()
			if _, err := c.Write([]byte("PING\r\n")); err != nil {
				t.Fatal(err)
			}
			reply := make([]byte, 7)
			if _, err := io.ReadFull(c, reply); err != nil || string(reply) != "+PONG\r\n" {
				t.Errorf("PING through Dial: %q (%v)", reply, err)
			}
			if err := p.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			if tr.name == "local" {
				return // another process here may take the port now
			}
			if c2, err := tr.r.Dial(ctx, "tcp", "127.0.0.1:"+port); err == nil {
				c2.Close()
				t.Errorf("dialled 127.0.0.1:%s on %s after its server was killed", port, tr.r.Name())
			}
		})
	}
}

// loopbackPort is a port free on this machine's loopback, below the
// ephemeral range (32768–60999), where no outgoing connection takes it
// (a simulated host has a loopback of its own).
func loopbackPort(t *testing.T) string {
	t.Helper()
	for range 100 {
		port := strconv.Itoa(20000 + mrand.IntN(12000))
		if ln, err := net.Listen("tcp", "127.0.0.1:"+port); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port on the loopback in 100 tries")
	return ""
}
