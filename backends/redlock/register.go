package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
)

func init() { backends.Register("redlock", Open) }

// Open is the registry's factory: a Redlock over cfg.Addrs (one address
// per independent master), with its own go-redis clients that Close
// closes. Params: fencing (default true), clockfloor (true), quarantine
// (true), bootstrap (false: when true, admit new nodes at once, see
// Bootstrap), maxttl (1m), drift (0.01), nodetimeout (scaled from the TTL).
func Open(cfg backends.Config) (locker.Locker, error) {
	if err := cfg.Check("fencing", "clockfloor", "quarantine", "bootstrap", "maxttl", "drift", "nodetimeout"); err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	fencing, err := cfg.Bool("fencing", true)
	if err != nil {
		return nil, err
	}
	floor, err := cfg.Bool("clockfloor", true)
	if err != nil {
		return nil, err
	}
	quarantine, err := cfg.Bool("quarantine", true)
	if err != nil {
		return nil, err
	}
	bootstrap, err := cfg.Bool("bootstrap", false)
	if err != nil {
		return nil, err
	}
	maxTTL, err := cfg.Duration("maxttl", DefaultMaxTTL)
	if err != nil {
		return nil, err
	}
	nodeTimeout, err := cfg.Duration("nodetimeout", 0)
	if err != nil {
		return nil, err
	}
	drift := DefaultDrift
	if v, ok := cfg.Params["drift"]; ok {
		if _, err := fmt.Sscan(v, &drift); err != nil {
			return nil, locker.Invalidf("param drift=%q: not a number", v)
		}
	}
	opts := []Option{WithClockFloor(floor), WithFencing(fencing), WithQuarantine(quarantine), WithMaxTTL(maxTTL), WithDrift(drift)}
	if nodeTimeout > 0 {
		opts = append(opts, WithNodeTimeout(nodeTimeout))
	}
	clients := Clients(cfg)
	r, err := New(clients, opts...)
	if err != nil {
		closeAll(clients)
		return nil, err
	}
	if bootstrap {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Bootstrap(ctx); err != nil {
			r.Close()
			closeAll(clients)
			return nil, err
		}
	}
	return &owned{Redlock: r, clients: clients}, nil
}

// Clients returns one go-redis client per address of cfg, with its
// credentials and TLS settings.
func Clients(cfg backends.Config) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(cfg.Addrs))
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

func closeAll(clients []redis.UniversalClient) error {
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// owned is a Redlock that owns its clients.
type owned struct {
	*Redlock
	clients []redis.UniversalClient
	once    sync.Once
	err     error
}

// Close closes the Redlock and then its clients; calls after the first
// return the first's result.
func (o *owned) Close() error {
	o.once.Do(func() { o.err = errors.Join(o.Redlock.Close(), closeAll(o.clients)) })
	return o.err
}
