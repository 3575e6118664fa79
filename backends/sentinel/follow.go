package sentinel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Timing of the follower.
const (
	// refreshEvery is how often each sentinel is asked for the master when
	// no switch is announced: the bound on how stale the follower can be
	// if a +switch-master message is lost.
	refreshEvery = time.Second
	// askTimeout bounds one question to a sentinel.
	askTimeout = 500 * time.Millisecond
	// retryAfter is the pause before resubscribing to a sentinel that
	// failed, so that a dead sentinel is not hammered.
	retryAfter = 100 * time.Millisecond
)

// follower keeps a Locker's connections on the current master. Every
// connection the FailoverClient and the engine make goes through dial,
// which records it with the address it reached. One goroutine per
// sentinel listens for +switch-master and asks the sentinel for the
// master (SENTINEL MASTER, with its config epoch) on every message and
// every refreshEvery; the master of the highest epoch wins. When it
// changes, the connections to former masters are closed, so the engine's
// next request redials, and dial sends any dial to a former master to the
// current one (a sentinel that has not yet heard of the failover may still
// name the old one).
type follower struct {
	fo   *goredis.FailoverOptions
	base func(ctx context.Context, network, addr string) (net.Conn, error)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	subs   []*goredis.PubSub
	cls    []*goredis.SentinelClient

	mu      sync.Mutex
	master  string          // "" until a sentinel answered
	epoch   int64           // config epoch of master
	masters map[string]bool // every address seen as master
	conns   map[*tracked]struct{}
}

func newFollower(fo *goredis.FailoverOptions) *follower {
	f := &follower{fo: fo, base: baseDialer(fo), masters: map[string]bool{}, conns: map[*tracked]struct{}{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// baseDialer is what go-redis would dial with: the caller's dialer, or a
// net.Dialer with the options' TLS config. (go-redis applies TLSConfig
// only when it supplies the dialer itself, which it no longer does once
// dial is installed.)
func baseDialer(fo *goredis.FailoverOptions) func(context.Context, string, string) (net.Conn, error) {
	if fo.Dialer != nil {
		return fo.Dialer
	}
	timeout := fo.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	nd := &net.Dialer{Timeout: timeout, KeepAlive: 5 * time.Minute}
	if fo.TLSConfig == nil {
		return nd.DialContext
	}
	return (&tls.Dialer{NetDialer: nd, Config: fo.TLSConfig}).DialContext
}

// start begins watching every sentinel the Locker was given.
func (f *follower) start() {
	for _, addr := range f.fo.SentinelAddrs {
		c := goredis.NewSentinelClient(&goredis.Options{
			Addr: addr, Dialer: f.base, Username: f.fo.SentinelUsername, Password: f.fo.SentinelPassword,
			MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
			DialTimeout: askTimeout, ReadTimeout: askTimeout, WriteTimeout: askTimeout,
		})
		ps := c.Subscribe(f.ctx) // no channel yet: dials nothing
		f.cls, f.subs = append(f.cls, c), append(f.subs, ps)
		f.wg.Add(1)
		go f.watch(c, ps)
	}
}

// close stops the watchers and waits for them.
func (f *follower) close() {
	f.cancel()
	for i := range f.subs {
		f.subs[i].Close() // unblocks a Receive in progress
	}
	f.wg.Wait()
	for _, c := range f.cls {
		c.Close()
	}
}

// watch follows one sentinel until the follower closes.
func (f *follower) watch(c *goredis.SentinelClient, ps *goredis.PubSub) {
	defer f.wg.Done()
	subscribed := false
	for f.ctx.Err() == nil {
		if !subscribed {
			subscribed = ps.Subscribe(f.ctx, "+switch-master") == nil
		}
		f.ask(c)
		_, err := ps.ReceiveTimeout(f.ctx, refreshEvery)
		if err == nil || isTimeout(err) {
			continue
		}
		subscribed = false // go-redis resubscribes on reconnect; make sure
		select {
		case <-f.ctx.Done():
		case <-time.After(retryAfter):
		}
	}
}

// ask asks one sentinel for the master and its config epoch.
func (f *follower) ask(c *goredis.SentinelClient) {
	ctx, cancel := context.WithTimeout(f.ctx, askTimeout)
	defer cancel()
	m, err := c.Master(ctx, f.fo.MasterName).Result()
	if err != nil {
		return
	}
	epoch, err := strconv.ParseInt(m["config-epoch"], 10, 64)
	if err != nil || m["ip"] == "" || m["port"] == "" {
		return
	}
	f.observe(epoch, net.JoinHostPort(m["ip"], m["port"]))
}

// observe records that a sentinel names addr master at epoch. A higher
// epoch than the current one moves the follower, and closes the
// connections to former masters.
func (f *follower) observe(epoch int64, addr string) {
	f.mu.Lock()
	if f.master != "" && (epoch <= f.epoch || addr == f.master) {
		f.epoch = max(f.epoch, epoch)
		f.mu.Unlock()
		return
	}
	f.master, f.epoch = addr, epoch
	f.masters[addr] = true
	var stale []*tracked
	for c := range f.conns {
		if f.stale(c.addr) {
			stale = append(stale, c)
		}
	}
	f.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// stale reports whether addr is a former master. f.mu is held.
func (f *follower) stale(addr string) bool {
	return f.masters[addr] && addr != f.master
}

// dial is the FailoverClient's dialer: sentinels and the master alike.
func (f *follower) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	if f.stale(addr) {
		addr = f.master
	}
	f.mu.Unlock()
	nc, err := f.base(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stale(addr) {
		nc.Close()
		return nil, fmt.Errorf("sentinel: %s stopped being the master of %q while it was dialled", addr, f.fo.MasterName)
	}
	c := &tracked{Conn: nc, addr: addr, f: f}
	f.conns[c] = struct{}{}
	return c, nil
}

// tracked is a connection the follower can close when its node stops
// being the master.
type tracked struct {
	net.Conn
	addr string
	f    *follower
	once sync.Once
}

// Close closes the connection and forgets it.
func (c *tracked) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
