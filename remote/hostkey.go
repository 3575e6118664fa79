package remote

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ErrUnknownHostKey is matched (errors.Is) by a HostKeyError for a host
// with no key on record.
var ErrUnknownHostKey = errors.New("unknown host key")

// ErrHostKeyChanged is matched by a HostKeyError for a host that presented
// a key other than the one on record, or a revoked key.
var ErrHostKeyChanged = errors.New("host key changed")

// HostKeyError is a host whose key could not be verified: Dial refuses to
// talk to it.
type HostKeyError struct {
	// Host is the host's name, Addr the address dialed.
	Host, Addr string
	// Presented is the fingerprint (SHA256) and type of the key the host
	// presented.
	Presented string
	// Known lists the keys on record for the host, with where each is
	// recorded; empty when the host is unknown.
	Known []string
	// Revoked is set when the presented key is marked @revoked.
	Revoked bool
	// Source says where keys were looked up.
	Source string
}

// Error names the host, the key it presented, the keys on record and
// where they are recorded.
func (e *HostKeyError) Error() string {
	switch {
	case e.Revoked:
		return fmt.Sprintf("remote: %s (%s): its host key %s is marked @revoked in %s: refusing to "+
			"connect", e.Host, e.Addr, e.Presented, e.Source)
	case len(e.Known) == 0:
		return fmt.Sprintf("remote: %s (%s): unknown host: its key %s is not in %s; check that fingerprint with the host's owner and record it "+
			"— refusing to connect",
			e.Host, e.Addr, e.Presented, e.Source)
	}
	return fmt.Sprintf("remote: %s (%s): HOST KEY CHANGED: it presented %s, but %s records %s — someone may be "+
		"intercepting the connection, "+
		"or the host was reinstalled; refusing to connect",
		e.Host, e.Addr, e.Presented, e.Source, strings.Join(e.Known, ", "))
}

// Is matches ErrUnknownHostKey or ErrHostKeyChanged.
func (e *HostKeyError) Is(target error) bool {
	unknown := len(e.Known) == 0 && !e.Revoked
	return target == ErrUnknownHostKey && unknown || target == ErrHostKeyChanged && !unknown
}

// describeKey is a key's SHA256 fingerprint and type.
func describeKey(k ssh.PublicKey) string {
	return ssh.FingerprintSHA256(k) + " (" + k.Type() + ")"
}

// ParseHostKey reads a host key as it is pinned in an inventory: the
// key itself ("ssh-ed25519 AAAA… [comment]", as in a .pub file or
// authorized_keys), or a whole known_hosts line ("host ssh-ed25519 AAAA…").
func ParseHostKey(s string) (ssh.PublicKey, error) {
	b := []byte(strings.TrimSpace(s))
	if k, _, _, _, err := ssh.ParseAuthorizedKey(b); err == nil {
		return k, nil
	}
	_, _, k, _, _, err := ssh.ParseKnownHosts(b)
	if err != nil {
		return nil, fmt.Errorf("remote: host key %q: neither a key (type base64) nor a known_hosts line: %w", abbreviate(s), err)
	}
	return k, nil
}

// abbreviate shortens a long value for an error.
func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// hostKeyCheck verifies a host's key, against keys pinned for it or
// known_hosts files.
type hostKeyCheck struct {
	host, addr string
	pinned     []ssh.PublicKey
	files      []string
	fileCheck  ssh.HostKeyCallback
	verified   ssh.PublicKey // the key the host presented, once verified
}

// newHostKeyCheck prepares the check of cfg's host: its pinned keys, or
// else its known_hosts files (~/.ssh/known_hosts if none is named).
func newHostKeyCheck(cfg *SSHConfig, name, addr string) (*hostKeyCheck, error) {
	c := &hostKeyCheck{host: name, addr: addr}
	for _, s := range cfg.HostKeys {
		k, err := ParseHostKey(s)
		if err != nil {
			return nil, err
		}
		c.pinned = append(c.pinned, k)
	}
	if len(c.pinned) > 0 {
		return c, nil
	}
	c.files = cfg.KnownHosts
	if len(c.files) == 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("remote: %s: no known_hosts file named and no home dir: %w", name, err)
		}
		c.files = []string{filepath.Join(home, ".ssh", "known_hosts")}
	}
	cb, err := knownhosts.New(c.files...)
	if err != nil {
		return nil, fmt.Errorf("remote: %s: known_hosts: %w", name, err)
	}
	c.fileCheck = cb
	return c, nil
}

func (c *hostKeyCheck) source() string {
	if len(c.pinned) > 0 {
		return "the host key pinned for it"
	}
	return strings.Join(c.files, ", ")
}

// verify is the ssh.HostKeyCallback.
func (c *hostKeyCheck) verify(hostname string, remote net.Addr, key ssh.PublicKey) error {
	e := &HostKeyError{Host: c.host, Addr: c.addr, Presented: describeKey(key), Source: c.source()}
	if len(c.pinned) > 0 {
		for _, k := range c.pinned {
			if bytes.Equal(k.Marshal(), key.Marshal()) {
				c.verified = key
				return nil
			}
			e.Known = append(e.Known, describeKey(k))
		}
		return e
	}
	err := c.fileCheck(hostname, remote, key)
	var keyErr *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	switch {
	case err == nil:
		c.verified = key
		return nil
	case errors.As(err, &revoked):
		e.Revoked = true
		return e
	case errors.As(err, &keyErr):
		for _, w := range keyErr.Want {
			e.Known = append(e.Known, fmt.Sprintf("%s at %s:%d", describeKey(w.Key), w.Filename, w.Line))
		}
		return e
	}
	return fmt.Errorf("remote: %s (%s): verifying its host key: %w", c.host, c.addr, err)
}

// algorithms are the host key algorithms to ask the host for: those of
// the keys on record, so that a host holding several keys presents one
// that can be verified. Nil (any) when none is on record: the handshake
// then fails with the key it presented named.
func (c *hostKeyCheck) algorithms(hostname string, remote net.Addr) []string {
	keys := c.pinned
	if c.fileCheck != nil {
		// The callback names the recorded keys when it rejects another.
		var keyErr *knownhosts.KeyError
		if err := c.fileCheck(hostname, remote, probeKey()); errors.As(err, &keyErr) {
			for _, w := range keyErr.Want {
				keys = append(keys, w.Key)
			}
		}
	}
	var algos []string
	for _, k := range keys {
		for _, a := range algorithmsFor(k.Type()) {
			if !slices.Contains(algos, a) {
				algos = append(algos, a)
			}
		}
	}
	return algos
}

// algorithmsFor lists the signature algorithms a key type serves.
func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// probeKey is a key no host has, to ask a known_hosts callback which keys
// it records.
func probeKey() ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err) // an ed25519 key always converts
	}
	return k
}
