// Package redis is the single-instance Redis lock: SET key value NX PX ttl
// to acquire, compare-and-delete and compare-and-extend Lua scripts to
// release and extend, and a fencing token from a per-key counter that the
// acquire script advances. It is safe exactly as long as that one server
// runs and keeps its data: a crash without persistence, or a failover to a
// replica that had not received the lock, grants the key twice.
//
// It is the Redlock algorithm on one node (quorum 1 of 1), so it shares
// backends/redlock's scripts, multiplexed connections and release
// notifications rather than repeating them; only the restart quarantine
// is off, since a lone node has no other voters to wait for.
package redis

import (
	"errors"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// Locker is a lock on one Redis server. It implements locker.Locker.
type Locker struct {
	*redlock.Redlock
	owned *goredis.Client // closed by Close when Open made it
	once  sync.Once
	err   error
}

// DefaultNodeTimeout is how long a request waits for the server. With one
// node there is no majority to answer in its place, so a generous timeout
// costs nothing and spares a slow moment from failing an operation.
const DefaultNodeTimeout = 250 * time.Millisecond

// New returns a Locker on the server client talks to, with fencing tokens
// from a plain per-key counter. opts are passed to redlock.New after the
// defaults (no quarantine, fencing on with plain counters,
// DefaultNodeTimeout), so they can override them. New does not close
// client.
func New(client *goredis.Client, opts ...redlock.Option) (*Locker, error) {
	opts = append([]redlock.Option{redlock.WithQuarantine(false), redlock.WithClockFloor(false), redlock.WithFencing(true),
		redlock.WithNodeTimeout(DefaultNodeTimeout)}, opts...)
	r, err := redlock.New([]*goredis.Client{client}, opts...)
	if err != nil {
		return nil, err
	}
	return &Locker{Redlock: r}, nil
}

// Open is the registry's factory: a Locker on cfg.Addrs[0] with a client
// of its own. Params: fencing (default true).
func Open(cfg backends.Config) (locker.Locker, error) {
	if err := cfg.Check("fencing"); err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	if len(cfg.Addrs) > 1 {
		return nil, locker.Invalidf("%d addresses %q: the redis backend uses one server (use redlock for several)", len(cfg.Addrs), cfg.Addrs)
	}
	fencing, err := cfg.Bool("fencing", true)
	if err != nil {
		return nil, err
	}
	client := goredis.NewClient(&goredis.Options{Addr: cfg.Addrs[0], Username: cfg.Username, Password: cfg.Password, TLSConfig: cfg.TLS})
	l, err := New(client, redlock.WithFencing(fencing))
	if err != nil {
		client.Close()
		return nil, err
	}
	l.owned = client
	return l, nil
}

// Info implements locker.Locker.
func (l *Locker) Info() locker.Info {
	info := l.Redlock.Info()
	info.Name = "redis"
	info.Guarantee = "one Redis server holds the key: safe while it runs and keeps its data; " +
		"a crash without persistence or a failover loses the lock, and a holder that pauses past its TTL overlaps the next"
	if info.Fencing {
		info.Guarantee += " (fencing tokens let the resource reject a paused holder)"
	}
	return info
}

// Close closes the lock, and the client if Open made it; calls after the
// first return the first's result.
func (l *Locker) Close() error {
	l.once.Do(func() {
		l.err = l.Redlock.Close()
		if l.owned != nil {
			l.err = errors.Join(l.err, l.owned.Close())
		}
	})
	return l.err
}
