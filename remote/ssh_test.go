package remote_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// newKey writes a fresh ed25519 private key to dir/name (mode 0600, or
// encrypted with passphrase when it is not empty) and returns its public
// half.
func newKey(t *testing.T, dir, name, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, name)
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, name, []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return file, k
}

func authorizedLine(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// TestHostKeys: a host whose key is not on record, or differs from the
// record, is refused with an error naming it; the record may be a
// known_hosts file or a key pinned in the config.
func TestHostKeys(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	lab := remotetest.New(t, 1)
	h := lab.Hosts[0]
	dir := t.TempDir()
	_, other := newKey(t, dir, "other", "")
	known := func(name, body string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	right := h.KnownHostsLine()
	wrong := h.Addr.String() + " " + authorizedLine(other)
	for _, tc := range []struct {
		name       string
		knownHosts string // a file's body; "" leaves the lab's
		pinned     []string
		want       error // nil: connects
		wantText   []string
	}{
		{name: "known", knownHosts: "# the lab's host\n" + right + "\n"},
		{name: "unknown", knownHosts: "192.0.2.1 " + authorizedLine(other) + "\n", want: remote.ErrUnknownHostKey,
			wantText: []string{"host1", h.Addr.String() + ":22", "unknown host", ssh.FingerprintSHA256(h.HostKey)}},
		{name: "changed", knownHosts: wrong + "\n", want: remote.ErrHostKeyChanged,
			wantText: []string{"host1", "HOST KEY CHANGED", ssh.FingerprintSHA256(h.HostKey), ssh.FingerprintSHA256(other), "changed:1"}},
		{name: "revoked", knownHosts: "@revoked * " + authorizedLine(h.HostKey) + "\n" + right + "\n", want: remote.ErrHostKeyChanged,
			wantText: []string{"host1", "@revoked"}},
		{name: "pinned", pinned: []string{authorizedLine(h.HostKey) + " comment"}},
		{name: "pinned known_hosts line", pinned: []string{right}},
		{name: "pinned other", pinned: []string{authorizedLine(other)}, want: remote.ErrHostKeyChanged,
			wantText: []string{"host1", "HOST KEY CHANGED", "pinned", ssh.FingerprintSHA256(other)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := lab.SSHConfig(0, "root")
			if tc.knownHosts != "" {
				cfg.KnownHosts = []string{known(tc.name, tc.knownHosts)}
			}
			cfg.HostKeys = tc.pinned
			s, err := remote.DialSSH(ctx, cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("connected, want %v", tc.want)
			}
			var hk *remote.HostKeyError
			if !errors.Is(err, tc.want) || !errors.As(err, &hk) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			for _, w := range tc.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			t.Log(err)
		})
	}
	t.Run("bad config", func(t *testing.T) {
		for _, cfg := range []remote.SSHConfig{
			{Addr: h.Addr.String(), User: "root", IdentityFiles: []string{lab.KeyFile}, KnownHosts: []string{filepath.Join(dir, "absent")}},
			{Addr: h.Addr.String(), User: "root", IdentityFiles: []string{lab.KeyFile}, HostKeys: []string{"not a key"}},
			{Addr: h.Addr.String(), IdentityFiles: []string{lab.KeyFile}, KnownHosts: []string{lab.KnownHosts}},
		} {
			if s, err := remote.DialSSH(ctx, cfg); err == nil {
				s.Close()
				t.Errorf("%+v connected", cfg)
			} else {
				t.Log(err)
			}
		}
	})
}

// TestKeys: keys come from files (not open to others, not encrypted) or
// the agent; a key the host does not authorize is refused; no key is
// ever printed.
func TestKeys(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	lab := remotetest.New(t, 1)
	dir := t.TempDir()
	stranger, _ := newKey(t, dir, "stranger", "")
	encrypted, _ := newKey(t, dir, "encrypted", "a passphrase")
	open := filepath.Join(dir, "open")
	b, err := os.ReadFile(lab.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		files    []string
		wantText string
	}{
		{name: "unauthorized", files: []string{stranger}, wantText: "unable to authenticate"},
		{name: "open to others", files: []string{open}, wantText: "chmod 600 " + open},
		{name: "encrypted", files: []string{encrypted}, wantText: "ssh-add " + encrypted},
		{name: "missing", files: []string{filepath.Join(dir, "missing")}, wantText: "missing"},
		{name: "none", wantText: "no key"},
		{name: "several, one good", files: []string{stranger, lab.KeyFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := lab.SSHConfig(0, "root")
			cfg.IdentityFiles = tc.files
			s, err := remote.DialSSH(ctx, cfg)
			if tc.wantText == "" {
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tc.wantText) || strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error %q: want it to say %q, and no key", err, tc.wantText)
			}
		})
	}

	t.Run("agent", func(t *testing.T) {
		sock := filepath.Join(dir, "agent.sock")
		agent := exec.Command("ssh-agent", "-D", "-a", sock)
		agent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := agent.Start(); err != nil {
			t.Skipf("no ssh-agent: %v", err)
		}
		t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
		add := func() error {
			cmd := exec.Command("ssh-add", lab.KeyFile)
			cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return errors.New(string(out))
			}
			return nil
		}
		deadline := time.Now().Add(time.Minute)
		for err := add(); err != nil; err = add() { // until the agent listens
			if time.Now().After(deadline) {
				t.Fatalf("ssh-add: %v", err)
			}
		}
		cfg := lab.SSHConfig(0, "root")
		cfg.IdentityFiles, cfg.Agent, cfg.AgentSocket = nil, true, sock
		s, err := remote.DialSSH(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := remote.Output(ctx, s, "id", "-un"); err != nil || strings.TrimSpace(string(out)) != "root" {
			t.Errorf("id -un: %q, %v", out, err)
		}
		s.Close()

		t.Setenv("SSH_AUTH_SOCK", "")
		cfg.AgentSocket = ""
		if s, err := remote.DialSSH(ctx, cfg); err == nil || !strings.Contains(err.Error(), "SSH_AUTH_SOCK") {
			if s != nil {
				s.Close()
			}
			t.Errorf("agent without a socket: %v", err)
		}
	})
}

// TestSudo: a user who is not root runs commands through sudo, and one
// whom sudo refuses gets sudo's word for it.
func TestSudo(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	if !remotetest.SudoAvailable() {
		t.Skip("sudo is not installed")
	}
	lab := remotetest.New(t, 1)
	bench := lab.Dial(t, 0, remotetest.Sudoer)
	if bench.Root() {
		t.Fatalf("%s logs in as root", remotetest.Sudoer)
	}
	if out, err := remote.Output(ctx, bench, "id", "-u"); err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Errorf("%s's command runs as %q (%v), want root through sudo", remotetest.Sudoer, out, err)
	}
	guest := lab.Dial(t, 0, remotetest.Guest)
	_, err := remote.Output(ctx, guest, "id", "-u")
	var exit *remote.ExitError
	if !errors.As(err, &exit) || !strings.Contains(exit.Stderr, "sudo") {
		t.Errorf("guest without sudo: %v", err)
	}
}

// TestBrokenLink: when the host stops answering, the keepalive breaks the
// connection: Done closes, Err and every command say ErrBroken.
func TestBrokenLink(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	lab := remotetest.New(t, 1)
	cfg := lab.SSHConfig(0, "root")
	cfg.KeepAlive = 200 * time.Millisecond
	s, err := remote.DialSSH(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := remote.Cut(ctx, s, lab.Control); err == nil {
		t.Fatal("Cut cut the control node's own path")
	}
	// What Cut refuses to do, done by hand on the host: drop what it
	// sends to the control node.
	host := remote.Local{Netns: lab.Hosts[0].Netns}
	if _, err := remote.Output(ctx, host, "ip", "rule", "add", "to", lab.Control.String(), "blackhole", "pref", "4600"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the connection outlived the cut")
	}
	if !errors.Is(s.Err(), remote.ErrBroken) {
		t.Errorf("Err %v, want ErrBroken", s.Err())
	}
	if err := s.Run(ctx, remote.Cmd{Path: "true"}); !errors.Is(err, remote.ErrBroken) {
		t.Errorf("Run after the break: %v, want ErrBroken", err)
	}
}
