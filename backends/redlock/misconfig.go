package redlock

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrConfig is wrapped by the errors of nodes that refuse Redlock's
// configuration — its credentials (WRONGPASS, NOAUTH), its commands or
// keys (an ACL's NOPERM), its database, its TLS settings — and of nodes
// that are one server given twice. Retrying cannot help: when too few
// nodes are left for a quorum, Acquire fails at once with an error that
// wraps ErrConfig and each node's refusal, rather than retry until its
// context ends, and so does TryAcquire. A node that refuses only
// sometimes (a credential being rotated) is dialled again, every
// 100 ms at most.
var ErrConfig = errors.New("redlock: a node refused Redlock's configuration")

// aclCommands is what Redlock's user must be allowed to run on every
// node, scripts included (an ACL applies inside them).
const aclCommands = "+evalsha +script|load +blpop +hget +set, +hsetnx and +info with the restart quarantine, " +
	"+incr with fencing tokens without the clock floor, " +
	"and inside the scripts " +
	"+get +set +del +exists +pttl +pexpire +incr +time +hget +hset +hdel +hmget +hrandfield " +
	"+zadd +zrange +zrem +zscore +rpush +ltrim (+client|setname with a ClientName, +select with a DB, +wait with WithWait)"

// configRefusals are the prefixes of the error replies that say the
// configuration is wrong, not the node busy or down.
var configRefusals = []string{
	"WRONGPASS", "NOAUTH", "NOPERM",
	"ERR AUTH", "ERR invalid password", "ERR invalid username-password",
	"ERR DB index", "ERR invalid DB index",
}

// misconfigured reports whether err says that Redlock's configuration is
// wrong: a refusal listed above, a refusal of a script's command by the
// ACL, or a TLS failure that a retry cannot mend (a certificate not
// trusted, a server that does not speak TLS).
func misconfigured(err error) bool {
	var re redisError
	if errors.As(err, &re) {
		s := string(re)
		for _, p := range configRefusals {
			if strings.HasPrefix(s, p) {
				return true
			}
		}
		return strings.Contains(s, "can't run this command") // an ACL, inside a script (Redis 7.0)
	}
	var (
		unknownCA x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		header    tls.RecordHeaderError
		alert     tls.AlertError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert)
}

// asConfig wraps err with ErrConfig when it is a refusal of the
// configuration.
func asConfig(err error) error {
	if err == nil || errors.Is(err, ErrConfig) || !misconfigured(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrConfig, err)
}

// servers tells one server given twice: two of a Redlock's nodes whose
// connections found the same run_id are one server, not independent
// masters (two addresses of one host, a proxy, a NAT), and neither votes.
type servers struct {
	mu  sync.Mutex
	run map[string]*node // run_id -> the node that reported it
}

// claim records that n's server process is run and returns, if another
// node of the Redlock reported the same one, that node.
func (s *servers) claim(n *node, run string) *node {
	if run == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		s.run = map[string]*node{}
	}
	for r, m := range s.run {
		if m == n && r != run {
			delete(s.run, r) // it restarted
		}
	}
	if other, ok := s.run[run]; ok && other != n {
		return other
	}
	s.run[run] = n
	return nil
}

// twin is, on a node, why it does not vote because it is one server with
// another node; nil when it is not.
type twin struct{ err atomic.Pointer[error] }

func (t *twin) set(err error) { t.err.Store(&err) }

func (t *twin) get() error {
	if p := t.err.Load(); p != nil {
		return *p
	}
	return nil
}

// sameServer marks n and other, whose connections found the same server
// process run, as one server: neither votes, for good (a Redlock's
// configuration does not change).
func (n *node) sameServer(other *node, run string) {
	err := fmt.Errorf("%w: nodes %s and %s are one server (run_id %s), not independent masters: a quorum of them is not a quorum of "+
		"servers", ErrConfig, other.addr, n.addr, run)
	n.twin.set(err)
	other.twin.set(err)
	n.r.event(eventConfig, n.addr, err)
}
