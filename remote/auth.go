package remote

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// keySource yields the keys a host is offered: from identity files, read
// once, and from the agent, asked at each handshake.
type keySource struct {
	files     []ssh.Signer
	agent     agent.ExtendedAgent
	agentConn io.Closer
}

// newKeySource reads cfg's identity files and connects to the agent if
// asked. A key is never printed: errors name its file.
func newKeySource(cfg *SSHConfig) (*keySource, error) {
	ks := &keySource{}
	for _, f := range cfg.IdentityFiles {
		s, err := readIdentity(f)
		if err != nil {
			return nil, err
		}
		ks.files = append(ks.files, s)
	}
	if cfg.Agent {
		sock := cfg.AgentSocket
		if sock == "" {
			sock = os.Getenv("SSH_AUTH_SOCK")
		}
		if sock == "" {
			return nil, errors.New("remote: agent asked for, but SSH_AUTH_SOCK is not set: start ssh-agent and ssh-add your key")
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, fmt.Errorf("remote: ssh agent at %s: %w", sock, err)
		}
		ks.agent, ks.agentConn = agent.NewClient(conn), conn
	}
	if len(ks.files) == 0 && ks.agent == nil {
		return nil, errors.New("remote: no key: name an identity file or use the agent")
	}
	return ks, nil
}

// readIdentity reads a private key file, refusing one that others can
// read (as ssh does) or that is encrypted (the agent holds those).
func readIdentity(path string) (ssh.Signer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("remote: identity file: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("remote: identity file %s is open to others (mode %04o): chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("remote: identity file: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, fmt.Errorf("remote: identity file %s is encrypted: add it to your agent (ssh-add %s) and use the agent instead", path, path)
	case err != nil:
		// The parser's message says what is wrong, not what the file holds.
		return nil, fmt.Errorf("remote: identity file %s: not a private key ssh can read: %w", path, err)
	}
	return s, nil
}

// signers is the callback of the publickey method: every key at once,
// since a client tries each method only once.
func (ks *keySource) signers() ([]ssh.Signer, error) {
	out := append([]ssh.Signer(nil), ks.files...)
	if ks.agent != nil {
		s, err := ks.agent.Signers()
		if err != nil {
			return nil, fmt.Errorf("ssh agent: %w", err)
		}
		out = append(out, s...)
	}
	return out, nil
}

func (ks *keySource) close() error {
	if ks.agentConn != nil {
		return ks.agentConn.Close()
	}
	return nil
}
