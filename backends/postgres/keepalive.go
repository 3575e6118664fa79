package postgres

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/lockbench/lockbench/locker"
)

// MinKeepalive is the shortest keepalive bound ConfigureKeepalive takes:
// the server counts its TCP keepalives in whole seconds, and an idle time
// of one second plus two probes a second apart is the least it can do.
const MinKeepalive = 3 * time.Second

// keepalive is how a keepalive bound D is spent: the connection is idle
// for Idle, then Count probes go Interval apart, and the connection dies
// when the last one goes unanswered — Idle + Count×Interval = D after the
// last packet from the other side; and data sent but not acknowledged
// for D (UserTimeout) kills it too, which covers a cut that strikes while
// a reply is in flight (keepalives do not run then).
type keepalive struct {
	Idle, Interval time.Duration
	Count          int
	UserTimeout    time.Duration
}

// splitKeepalive spends d — whole seconds, at least MinKeepalive — as two
// probes a third of it (rounded down to seconds) apart after an idle time
// of the rest.
func splitKeepalive(d time.Duration) (keepalive, error) {
	if d < MinKeepalive || d%time.Second != 0 {
		return keepalive{}, locker.Invalidf("keepalive %v: want whole seconds, at least %v (the server counts its keepalives in "+
			"seconds)", d, MinKeepalive)
	}
	interval := d / 3 / time.Second * time.Second
	return keepalive{Idle: d - 2*interval, Interval: interval, Count: 2, UserTimeout: d}, nil
}

// ConfigureKeepalive makes every session of cc die, on both ends, within
// d of its peer falling silent (a network cut, a host gone): the server's
// side through the session settings tcp_keepalives_idle,
// tcp_keepalives_interval, tcp_keepalives_count and tcp_user_timeout
// (which any user may set for a session of their own), the client's side
// through the same keepalives and TCP_USER_TIMEOUT on the sockets it
// dials. d is whole seconds, at least MinKeepalive.
//
// Why both ends: the server frees the advisory locks of a session only
// when it ends the session, and without keepalives it never learns that a
// cut-off client is gone (with Linux's defaults, tcp_keepalive_time 7200 s
// and 9 probes 75 s apart, it takes 2 h 11 min); the client's side, so
// that its waiters and idle sessions, which the server dropped, fail
// within d too instead of after Go's default (15 s idle, then 9 probes
// 15 s apart). A Locker whose pool is configured so must be told
// (Options.Keepalive): its advisory leases then promise no more than d.
func ConfigureKeepalive(cc *pgx.ConnConfig, d time.Duration) error {
	k, err := splitKeepalive(d)
	if err != nil {
		return err
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	for name, v := range k.settings() {
		cc.RuntimeParams[name] = v
	}
	dialer := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: k.Idle, Interval: k.Interval, Count: k.Count},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(k.UserTimeout/time.Millisecond))
			})
			if err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("TCP_USER_TIMEOUT: %w", serr)
			}
			return nil
		},
	}
	if cc.ConnectTimeout > 0 {
		dialer.Timeout = cc.ConnectTimeout
	}
	cc.DialFunc = dialer.DialContext
	return nil
}

// settings are the server's session settings for k.
func (k keepalive) settings() map[string]string {
	return map[string]string{
		"tcp_keepalives_idle":     strconv.Itoa(int(k.Idle / time.Second)),
		"tcp_keepalives_interval": strconv.Itoa(int(k.Interval / time.Second)),
		"tcp_keepalives_count":    strconv.Itoa(k.Count),
		"tcp_user_timeout":        strconv.Itoa(int(k.UserTimeout / time.Millisecond)),
	}
}

// checkKeepalive checks that the sessions of a pool whose connection
// config is cc are set up as ConfigureKeepalive(cc, d) does: a Locker
// told of a bound its sessions do not have would promise what the server
// does not keep.
func checkKeepalive(cc *pgx.ConnConfig, d time.Duration) error {
	k, err := splitKeepalive(d)
	if err != nil {
		return err
	}
	for name, v := range k.settings() {
		if got := cc.RuntimeParams[name]; got != v {
			return locker.Invalidf("keepalive %v: the pool's sessions set %s=%q, want %q (configure the pool with "+
				"ConfigureKeepalive)", d, name, got, v)
		}
	}
	return nil
}

// sessionBound is the longest an advisory lease of a Locker whose
// sessions die within keepalive of their client falling silent may
// promise: the server may free the lock keepalive after it last heard from
// the holder, which is no earlier than the holder's last request was sent
// — less the drift allowance, which covers the one-way trip of a grant's
// reply (the lease counts from the reply's arrival) and the kernel's
// timers. 0 (no keepalive) means no bound.
func sessionBound(keepalive time.Duration) time.Duration {
	if keepalive <= 0 {
		return 0
	}
	return keepalive - drift(keepalive)
}
