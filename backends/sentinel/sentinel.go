// Package sentinel is the Redis lock on a master–replica set watched by
// Redis Sentinel: the lock is the single-instance one (SET NX PX, the
// compare-and-delete and compare-and-extend scripts, a per-key fencing
// counter) on whichever node the sentinels currently report as master,
// reached through a go-redis FailoverClient.
//
// It is backends/redis's lock (backends/redlock's engine on one node) on a
// FailoverClient, so the scripts, the multiplexed connections and the
// release notifications are shared rather than copied: no restart
// quarantine (a lone master has no other voters), fencing on by default.
//
// Replication from the master to its replicas is asynchronous. A lock
// written to the master and not yet replicated is lost when Sentinel
// promotes a replica, and a second client is then granted the key while
// the first still holds it; the fencing counter's last increment can be
// lost the same way, so tokens can repeat. WithWait makes every grant wait
// (Redis WAIT) until some replicas acknowledged it, which closes that path
// for those replicas only: WAIT is not synchronous replication, and
// Sentinel may still promote a replica that had not acknowledged.
//
// The engine dials its own connections with the FailoverClient's dialer,
// so go-redis's own reaction to a failover (closing its pooled connections
// to the demoted master) does not reach them; and after SENTINEL FAILOVER
// the demoted master stays a writable master for about ten seconds, until
// the sentinels reconfigure it. A Locker therefore follows the sentinels
// itself (see follower): it closes its connections to a demoted master as
// soon as a sentinel reports the switch, and redials the new one.
package sentinel

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// DefaultMasterName is the name the sentinels monitor the set by when the
// master param is not given: the name compose gives its Sentinel sets.
const DefaultMasterName = "lockbench"

// DefaultWaitTimeout bounds the WAIT of a grant when the waittimeout param
// is not given: long enough for replicas on a LAN, far below a lock's TTL.
const DefaultWaitTimeout = 100 * time.Millisecond

// DefaultNodeTimeout is how long a request may wait for the master before
// it counts as failed, when neither WithEngine nor the nodetimeout param
// sets it: a single Redis server's (see redis.DefaultNodeTimeout), since
// the master is one.
const DefaultNodeTimeout = redis.DefaultNodeTimeout

// waitSlack is how late Redis may answer a WAIT after its timeout: blocked
// clients time out on the server's cron, every 100 ms at the default hz.
const waitSlack = 100 * time.Millisecond

// Option configures a sentinel Locker.
type Option func(*config) error

type config struct {
	fencing     bool
	wait        int
	waitTimeout time.Duration
	engine      []redlock.Option
}

// WithFencing turns fencing tokens on or off (on by default). The tokens
// come from a counter on the master, which a failover can set back: they
// order grants only as long as no acquisition is lost to a failover.
func WithFencing(on bool) Option {
	return func(c *config) error { c.fencing = on; return nil }
}

// WithWait makes every grant wait until replicas replicas acknowledged it
// (Redis WAIT), for at most timeout; a grant they do not acknowledge in
// time is released and the attempt fails with locker.ErrNotAcquired. It
// narrows the window in which a failover loses a lock to failovers that
// promote a replica that had not acknowledged. replicas 0 (the default)
// turns it off; otherwise timeout must be at least 1 ms, since WAIT counts
// whole milliseconds and a timeout of 0 would block forever.
func WithWait(replicas int, timeout time.Duration) Option {
	return func(c *config) error {
		if replicas < 0 {
			return locker.Invalidf("wait for %d replicas: must not be negative", replicas)
		}
		if replicas > 0 && timeout < time.Millisecond {
			return locker.Invalidf("wait timeout %v for %d replicas: must be at least 1ms", timeout, replicas)
		}
		c.wait, c.waitTimeout = replicas, timeout
		return nil
	}
}

// WithEngine passes options to the Redlock engine underneath (drift, node
// timeout, max TTL), applied after the defaults and after WithFencing and
// WithWait, so they can override them. The default node timeout is
// DefaultNodeTimeout, plus the wait timeout and Redis's WAIT slack (100 ms)
// when WithWait is on.
func WithEngine(opts ...redlock.Option) Option {
	return func(c *config) error { c.engine = append(c.engine, opts...); return nil }
}

// Locker is a lock on the master of a Sentinel-managed set. It implements
// locker.Locker and is safe for concurrent use.
type Locker struct {
	*redlock.Redlock
	client    *goredis.Client
	follow    *follower
	sentinels []string
	cfg       config

	once sync.Once
}

var _ locker.Locker = (*Locker)(nil)

// New returns a Locker on the master that the sentinels of fo report for
// fo.MasterName. It makes its own FailoverClient from fo, with fo.Dialer
// (or a plain dialer with fo.TLSConfig) wrapped so that it can follow
// failovers, and closes it in Close. Fencing is on unless WithFencing(false).
func New(fo goredis.FailoverOptions, opts ...Option) (*Locker, error) {
	if fo.MasterName == "" {
		return nil, locker.Invalidf("empty Sentinel master name")
	}
	if len(fo.SentinelAddrs) == 0 {
		return nil, locker.Invalidf("no sentinel addresses for master %q", fo.MasterName)
	}
	for i, a := range fo.SentinelAddrs {
		if strings.TrimSpace(a) == "" {
			return nil, locker.Invalidf("sentinel address %d of %q is empty", i, fo.SentinelAddrs)
		}
	}
	if fo.RouteByLatency || fo.RouteRandomly || fo.ReplicaOnly {
		return nil, locker.Invalidf("FailoverOptions route to replicas (RouteByLatency %v, RouteRandomly %v, ReplicaOnly %v): a lock must "+
			"be taken on the master",
			fo.RouteByLatency, fo.RouteRandomly, fo.ReplicaOnly)
	}
	c := config{fencing: true}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	// A single Redis server's lock on whatever the master is: plain
	// counters, as a Redis lock has them (a failover that loses the
	// counter's increment is part of what this backend shows), and no
	// quarantine. Grants that WAIT share a connection of their own to the
	// master (Extend and Release do not queue behind them), and a WAIT
	// holds it until it returns, up to waitSlack after its timeout: a
	// grant queued behind another's WAIT must allow for that.
	timeout := DefaultNodeTimeout
	engine := []redlock.Option{redlock.WithFencing(c.fencing)}
	if c.wait > 0 {
		timeout += c.waitTimeout + waitSlack
		engine = append(engine, redlock.WithWait(c.wait, c.waitTimeout))
	}
	engine = append(engine, redlock.WithNodeTimeout(timeout))
	engine = append(engine, c.engine...)

	sentinels := append([]string(nil), fo.SentinelAddrs...)
	f := newFollower(&fo)
	fo.Dialer = f.dial
	client := goredis.NewFailoverClient(&fo)
	r, err := redis.New(client, engine...)
	if err != nil {
		client.Close()
		return nil, err
	}
	f.start()
	return &Locker{Redlock: r.Redlock, client: client, follow: f, sentinels: sentinels, cfg: c}, nil
}

// Open is the registry's factory: a Locker on the set whose sentinels are
// cfg.Addrs, with cfg's credentials and TLS for the Redis nodes (TLS for
// the sentinels too; the sentinels are asked without credentials — use New
// with FailoverOptions.SentinelPassword for sentinels that need them).
// Params: master (the monitored name, default
// DefaultMasterName), fencing (default true), wait (replicas to WAIT for
// after each grant, default 0), waittimeout (default DefaultWaitTimeout)
// and nodetimeout (how long a request may wait for the master; see
// WithEngine for the default).
func Open(cfg backends.Config) (locker.Locker, error) {
	if err := cfg.Check("master", "fencing", "wait", "waittimeout", "nodetimeout"); err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	master := cfg.String("master", DefaultMasterName)
	if strings.TrimSpace(master) == "" {
		return nil, locker.Invalidf("param master=%q: empty master name", master)
	}
	fencing, err := cfg.Bool("fencing", true)
	if err != nil {
		return nil, err
	}
	wait, err := cfg.Int("wait", 0)
	if err != nil {
		return nil, err
	}
	waitTimeout, err := cfg.Duration("waittimeout", DefaultWaitTimeout)
	if err != nil {
		return nil, err
	}
	opts := []Option{WithFencing(fencing), WithWait(wait, waitTimeout)}
	if _, ok := cfg.Params["nodetimeout"]; ok {
		d, err := cfg.Duration("nodetimeout", 0)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithEngine(redlock.WithNodeTimeout(d)))
	}
	return New(goredis.FailoverOptions{
		MasterName:    master,
		SentinelAddrs: cfg.Addrs,
		Username:      cfg.Username,
		Password:      cfg.Password,
		TLSConfig:     cfg.TLS,
	}, opts...)
}

// Info implements locker.Locker. Nodes are the sentinel addresses the
// Locker was given: the master changes with failovers, the sentinels that
// name it do not.
func (l *Locker) Info() locker.Info {
	info := l.Redlock.Info()
	info.Name = "sentinel"
	info.Nodes = append([]string(nil), l.sentinels...)
	info.Quorum = 1
	g := "one Redis master holds the key, replicated asynchronously to its replicas and failed over by Sentinel: " +
		"a failover can promote a replica that never received the lock, and the key is then granted twice"
	if l.cfg.wait > 0 {
		g += fmt.Sprintf("; each grant WAITs up to %v for %d replica(s) to acknowledge it and fails otherwise, "+
			"which saves the lock only if the promoted replica is one that acknowledged: "+
			"WAIT is not synchronous replication, and Sentinel may promote a replica that had not", l.cfg.waitTimeout, l.cfg.wait)
	}
	if info.Fencing {
		g += "; fencing tokens come from a counter on the master, which a failover can set back, so they may repeat after one"
	}
	info.Guarantee = g + "; a holder that pauses past its TTL overlaps the next"
	return info
}

// Close ends every lease still held (with locker.ErrLost wrapping
// locker.ErrClosed), stops following the sentinels and closes the
// connections and the FailoverClient. Calls after the first return nil.
func (l *Locker) Close() error {
	var err error
	l.once.Do(func() {
		err = l.Redlock.Close()
		l.follow.close()
		err = errors.Join(err, l.client.Close())
	})
	return err
}
