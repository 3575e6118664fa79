// Package redlockbackend registers backends/redlock with lockbench's
// backend registry under the name "redlock". It is the adapter between
// the library, which knows nothing of lockbench, and the registry: its
// Config, and its descriptor (five independent masters, a case's max
// TTL, the admission of new nodes). Import it for its side effect
// (backends/all does).
package redlockbackend

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// bootstrapTimeout bounds the Bootstrap that the bootstrap param asks for.
const bootstrapTimeout = 10 * time.Second

// Open is the registry's factory: a Redlock over cfg.Addrs (one address
// per independent master), with go-redis clients of its own (cfg's
// credentials and TLS) that Close closes. Params: fencing (default true),
// clockfloor (default true with fencing), quarantine (true), quorumfirst
// (false: redlock.WithQuorumFirst), maxttl (1m), drift (0.01),
// nodetimeout (scaled from the TTL), keyprefix (redlock.DefaultKeyPrefix:
// redlock.WithKeyPrefix), and bootstrap (false):
// true makes Open first admit brand-new nodes at once
// (redlock.Bootstrap), and fail if they may have held locks recently
// (up for less than the max TTL, or flushed: redlock.ErrMaybeInUse);
// force admits those too (redlock.Force: for nodes just created — on
// nodes that restarted empty while a lock was held it risks a double
// grant). Either way, on nodes already in use it admits nothing and opens
// all the same: nodes that lost their data serve their quarantine.
// Bootstrap belongs where the nodes are created, once; lockbench's runner
// does it there, forced, on the nodes it has just started.
func Open(cfg backends.Config) (locker.Locker, error) {
	err := cfg.Check("fencing", "clockfloor", "quarantine", "quorumfirst", "bootstrap", "maxttl", "drift", "nodetimeout", "keyprefix")
	if err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	opts, err := options(cfg)
	if err != nil {
		return nil, err
	}
	var bootstrap []redlock.BootstrapOption
	switch v := cfg.Params["bootstrap"]; v {
	case "", "false":
	case "true":
		bootstrap = []redlock.BootstrapOption{}
	case "force":
		bootstrap = []redlock.BootstrapOption{redlock.Force()}
	default:
		return nil, locker.Invalidf("param bootstrap=%q: want false, true or force", v)
	}
	clients := Clients(cfg)
	r, err := redlock.New(clients, opts...)
	if err != nil {
		closeAll(clients)
		return nil, err
	}
	if bootstrap != nil {
		ctx, cancel := context.WithTimeout(context.Background(), bootstrapTimeout)
		defer cancel()
		if err := r.Bootstrap(ctx, bootstrap...); err != nil && !errors.Is(err, redlock.ErrInUse) {
			r.Close()
			closeAll(clients)
			return nil, err
		}
	}
	return &owned{Redlock: r, clients: clients}, nil
}

// options turns cfg's params into redlock options.
func options(cfg backends.Config) ([]redlock.Option, error) {
	fencing, err := cfg.Bool("fencing", true)
	if err != nil {
		return nil, err
	}
	quarantine, err := cfg.Bool("quarantine", true)
	if err != nil {
		return nil, err
	}
	maxTTL, err := cfg.Duration("maxttl", redlock.DefaultMaxTTL)
	if err != nil {
		return nil, err
	}
	quorumFirst, err := cfg.Bool("quorumfirst", false)
	if err != nil {
		return nil, err
	}
	opts := []redlock.Option{redlock.WithFencing(fencing), redlock.WithQuarantine(quarantine), redlock.WithQuorumFirst(quorumFirst),
		redlock.WithMaxTTL(maxTTL)}
	if _, ok := cfg.Params["clockfloor"]; ok {
		floor, err := cfg.Bool("clockfloor", true)
		if err != nil {
			return nil, err
		}
		opts = append(opts, redlock.WithClockFloor(floor))
	}
	if v, ok := cfg.Params["drift"]; ok {
		drift, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, locker.Invalidf("param drift=%q: not a number", v)
		}
		opts = append(opts, redlock.WithDrift(drift))
	}
	if _, ok := cfg.Params["nodetimeout"]; ok {
		d, err := cfg.Duration("nodetimeout", 0)
		if err != nil {
			return nil, err
		}
		opts = append(opts, redlock.WithNodeTimeout(d))
	}
	if v, ok := cfg.Params["keyprefix"]; ok {
		opts = append(opts, redlock.WithKeyPrefix(v))
	}
	if cfg.Clock != nil {
		opts = append(opts, redlock.WithClock(cfg.Clock))
	}
	return opts, nil
}

// Clients returns one go-redis client per address of cfg, with its
// credentials and TLS settings.
func Clients(cfg backends.Config) []*redis.Client {
	clients := make([]*redis.Client, len(cfg.Addrs))
	for i, addr := range cfg.Addrs {
		clients[i] = redis.NewClient(&redis.Options{
			Addr:      addr,
			Username:  cfg.Username,
			Password:  cfg.Password,
			TLSConfig: cfg.TLS,
		})
	}
	return clients
}

func closeAll(clients []*redis.Client) error {
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// owned is a Redlock that owns its clients.
type owned struct {
	*redlock.Redlock
	clients []*redis.Client
	once    sync.Once
	err     error
}

// Close closes the Redlock and then its clients; calls after the first
// return the first's result.
func (o *owned) Close() error {
	o.once.Do(func() { o.err = errors.Join(o.Redlock.Close(), closeAll(o.clients)) })
	return o.err
}
