// Package redsync adapts github.com/go-redsync/redsync/v4, the reference
// Go implementation of Redlock, to the locker contract, so that every
// lockbench comparison has the library most Go services actually use as
// its reference point, run on the same N Redis masters as our Redlock.
//
// It behaves like redsync with redsync's own defaults — 32 tries per
// LockContext, a random 50–250 ms delay between tries, a drift factor of
// 0.01 and a per-try timeout of 5% of the TTL — unless params change them.
// What the adapter adds is only what the contract asks for: Acquire keeps
// calling LockContext until the lock is held or ctx ends (redsync gives up
// after its tries), TryAcquire makes one try, leases run the shared
// lifecycle (locker.NewLease), and redsync's errors are wrapped in the
// locker sentinels with redsync's own error kept inside, so errors.Is and
// errors.As see both.
//
// redsync issues no fencing token and has no restart quarantine: a
// majority node that restarts without its data can grant a held key
// again.
package redsync

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	rs "github.com/go-redsync/redsync/v4"
	rspool "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
)

// Locker is a redsync lock over N independent Redis masters. It implements
// locker.Locker and is safe for concurrent use.
type Locker struct {
	rs     *rs.Redsync
	addrs  []string
	quorum int
	opts   []rs.Option // applied to every mutex, before the TTL
	owned  []goredis.UniversalClient
	// drift is the drift factor Info declares: redsync's default, or the
	// drift param of Open (an rs.WithDriftFactor given to New cannot be
	// read back).
	drift float64

	// closing's context is the parent of every lease; it counts the
	// LockContext calls in progress, which Close ends and waits for
	// before it closes the clients.
	closing locker.Closing
}

var _ locker.Locker = (*Locker)(nil)

// New returns a Locker over the given clients, one per independent Redis
// master, with redsync's defaults changed by opts (redsync.WithTries,
// WithRetryDelay, WithDriftFactor, WithTimeoutFactor, ...). The expiry of
// each mutex is the lease's TTL, whatever opts say. New does not close the
// clients. Info declares redsync's default drift factor whatever opts
// say (a redsync option cannot be read back); Open declares its drift
// param. Per-node errors name the node at redsync's index in clients,
// which is not the node that failed if opts shuffle the pools.
func New(clients []goredis.UniversalClient, opts ...rs.Option) (*Locker, error) {
	if len(clients) == 0 {
		return nil, locker.Invalidf("redsync needs at least one Redis client, got none")
	}
	pools := make([]rspool.Pool, len(clients))
	addrs := make([]string, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, locker.Invalidf("client %d of %d is nil", i, len(clients))
		}
		pools[i] = rsgoredis.NewPool(c)
		addrs[i] = fmt.Sprintf("client %d", i)
		if pc, ok := c.(*goredis.Client); ok {
			addrs[i] = pc.Options().Addr
		}
	}
	return &Locker{rs: rs.New(pools...), addrs: addrs, quorum: len(clients)/2 + 1, opts: opts, drift: defaultDrift}, nil
}

// defaultDrift is redsync's default drift factor (rs.WithDriftFactor).
const defaultDrift = 0.01

// Open is the registry's factory: a Locker over cfg.Addrs with go-redis
// clients of its own (cfg's credentials and TLS), which Close closes.
// Params, each left at redsync's default when not given: tries (attempts
// per LockContext, default 32), retrydelay (fixed delay between tries, a
// duration such as "1ms"; default random 50–250 ms), drift (clock drift
// factor, default 0.01) and timeoutfactor (per-try timeout as a fraction
// of the TTL, default 0.05).
func Open(cfg backends.Config) (locker.Locker, error) {
	if err := cfg.Check("tries", "retrydelay", "drift", "timeoutfactor"); err != nil {
		return nil, err
	}
	if err := cfg.NeedAddrs(1); err != nil {
		return nil, err
	}
	var opts []rs.Option
	drift := defaultDrift
	if _, ok := cfg.Params["tries"]; ok {
		tries, err := cfg.Int("tries", 0)
		if err != nil {
			return nil, err
		}
		if tries < 1 {
			return nil, locker.Invalidf("param tries=%d: need at least 1", tries)
		}
		opts = append(opts, rs.WithTries(tries))
	}
	if _, ok := cfg.Params["retrydelay"]; ok {
		d, err := cfg.Duration("retrydelay", 0)
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, locker.Invalidf("param retrydelay=%v: must be positive, or tries would spin", d)
		}
		opts = append(opts, rs.WithRetryDelay(d))
	}
	for _, p := range []struct {
		name string
		ok   func(float64) bool
		want string
		set  func(float64) rs.Option
	}{
		{"drift", func(f float64) bool { return f >= 0 && f < 0.5 }, "in [0, 0.5)", rs.WithDriftFactor},
		{"timeoutfactor", func(f float64) bool { return f > 0 && f < 1 }, "in (0, 1)", rs.WithTimeoutFactor},
	} {
		v, ok := cfg.Params[p.name]
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, locker.Invalidf("param %s=%q: not a number", p.name, v)
		}
		if !p.ok(f) {
			return nil, locker.Invalidf("param %s=%v: must be %s", p.name, f, p.want)
		}
		opts = append(opts, p.set(f))
		if p.name == "drift" {
			drift = f
		}
	}
	clients := make([]goredis.UniversalClient, len(cfg.Addrs))
	for i, addr := range cfg.Addrs {
		clients[i] = goredis.NewClient(&goredis.Options{
			Addr: addr, Username: cfg.Username, Password: cfg.Password, TLSConfig: cfg.TLS,
		})
	}
	l, err := New(clients, opts...)
	if err != nil {
		for _, c := range clients {
			c.Close()
		}
		return nil, err
	}
	l.owned, l.drift = clients, drift
	return l, nil
}

// Info implements locker.Locker.
func (l *Locker) Info() locker.Info {
	return locker.Info{
		Name:    "redsync",
		Nodes:   append([]string(nil), l.addrs...),
		Quorum:  l.quorum,
		Fencing: false,
		// redsync's validity is the expiry less the attempt's time less
		// expiry×drift, from the start of the attempt that won.
		DriftRate: l.drift,
		Guarantee: fmt.Sprintf("redsync (the reference Go Redlock) holds the key on a majority (%d of %d) of independent Redis masters; "+
			"redsync issues no fencing token, so a holder that pauses past its validity overlaps the next and its writes are not rejected; "+
			"unsafe if a majority node restarts without its data (no delayed restart) or a node's clock jumps", l.quorum, len(l.addrs)),
	}
}

// Close ends every lease still held (with locker.ErrLost wrapping
// locker.ErrClosed), stops the Acquires in progress and waits for them,
// and closes the clients Open made. Keys still held stay taken on the
// servers until their TTL. Calls after the first return nil.
func (l *Locker) Close() error {
	if !l.closing.Begin() {
		return nil
	}
	l.closing.Wait()
	var err error
	for _, c := range l.owned {
		err = errors.Join(err, c.Close())
	}
	return err
}

// Acquire implements locker.Locker: LockContext with redsync's tries and
// delays, called again for as long as ctx lasts and the retry strategy
// (locker.WithRetry) agrees — redsync alone gives up after its tries.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	return locker.Retry(ctx, o.Retry, nil, func(ctx context.Context) (locker.Lease, error) {
		return l.lock(ctx, key, o, false)
	})
}

// TryAcquire implements locker.Locker: a single try (redsync.WithTries(1)).
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	return l.lock(ctx, key, o, true)
}

// resolve checks key and options, and that the Locker is open.
func (l *Locker) resolve(key string, opts []locker.Option) (locker.Options, error) {
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		return o, err
	}
	if o.TTL < time.Millisecond {
		return o, locker.Invalidf("TTL %v for key %q: Redis expires in whole milliseconds", o.TTL, key)
	}
	return o, l.closing.Err()
}

// lock runs one LockContext (or one try) and turns its outcome into a
// lease or an error wrapping locker.ErrNotAcquired. Close interrupts it.
func (l *Locker) lock(ctx context.Context, key string, o locker.Options, once bool) (locker.Lease, error) {
	if err := l.closing.Add(); err != nil {
		return nil, err
	}
	defer l.closing.Done()
	lctx, cancel := l.closing.Bind(ctx)
	defer cancel()

	m := l.rs.NewMutex(key, l.mutexOptions(o.TTL)...)
	var err error
	if once {
		err = m.TryLockContext(lctx)
	} else {
		err = m.LockContext(lctx)
	}
	if err == nil {
		g := locker.Grant{Key: key, ValidUntil: m.Until()}
		return locker.NewLease(l.closing.Context(), &hold{l: l, key: key, value: m.Value()}, g, o), nil
	}
	if cerr := l.closing.Err(); cerr != nil {
		return nil, fmt.Errorf("acquire %q: %w (redsync: %w)", key, cerr, err)
	}
	return nil, withCtx(ctx, fmt.Errorf("%w: %q: %w", locker.ErrNotAcquired, key, l.nodeErrors(err)))
}

// mutexOptions are the Locker's redsync options with the expiry set to
// ttl, then extra.
func (l *Locker) mutexOptions(ttl time.Duration, extra ...rs.Option) []rs.Option {
	opts := make([]rs.Option, 0, len(l.opts)+1+len(extra))
	opts = append(opts, l.opts...)
	opts = append(opts, rs.WithExpiry(ttl))
	return append(opts, extra...)
}

// hold is the redsync side of a lease: the key and the random value that
// proves it is ours. Each operation makes a fresh mutex with that value, so
// concurrent Extend and Release share no mutable state.
type hold struct {
	l          *Locker
	key, value string
}

var _ locker.Holder = (*hold)(nil)

// Extend runs redsync's ExtendContext: the key's expiry is reset to ttl on
// every node that still holds it for our value.
func (h *hold) Extend(ctx context.Context, ttl time.Duration) (time.Time, error) {
	if ttl < time.Millisecond {
		return time.Time{}, locker.Invalidf("extend TTL %v for key %q: Redis expires in whole milliseconds", ttl, h.key)
	}
	m := h.l.rs.NewMutex(h.key, h.l.mutexOptions(ttl, rs.WithValue(h.value))...)
	ok, err := m.ExtendContext(ctx)
	if ok {
		return m.Until(), nil
	}
	if err == nil {
		err = rs.ErrExtendFailed
	}
	if h.l.notOurs(err) {
		return time.Time{}, fmt.Errorf("%w: %q: %w", locker.ErrNotHeld, h.key, h.l.nodeErrors(err))
	}
	return time.Time{}, withCtx(ctx, fmt.Errorf("%q extended on fewer than %d nodes: %w", h.key, h.l.quorum, h.l.nodeErrors(err)))
}

// Release runs redsync's UnlockContext: the key is deleted on every node
// that holds it for our value.
func (h *hold) Release(ctx context.Context) error {
	m := h.l.rs.NewMutex(h.key, h.l.mutexOptions(time.Second, rs.WithValue(h.value))...)
	ok, err := m.UnlockContext(ctx)
	if ok {
		return nil
	}
	if err == nil {
		err = rs.ErrLockAlreadyExpired
	}
	if h.l.notOurs(err) {
		return fmt.Errorf("%w: %q: %w", locker.ErrNotHeld, h.key, h.l.nodeErrors(err))
	}
	return withCtx(ctx, fmt.Errorf("%q released on fewer than %d nodes; it stays taken on the others until its TTL: "+
		"%w", h.key, h.l.quorum, h.l.nodeErrors(err)))
}

// notOurs reports whether a failed extend or unlock says the key is no
// longer ours: taken by another value or gone on so many nodes that no
// quorum can hold it for us, or an extension that came too late
// (redsync.ErrExtendFailed).
func (l *Locker) notOurs(err error) bool {
	var taken *rs.ErrTaken
	if errors.As(err, &taken) || errors.Is(err, rs.ErrExtendFailed) {
		return true
	}
	n := 0
	for _, e := range flatten(err) {
		var nt *rs.ErrNodeTaken
		if errors.Is(e, rs.ErrLockAlreadyExpired) || errors.As(e, &nt) {
			n++
		}
	}
	return n > len(l.addrs)-l.quorum
}

// nodeErrors returns err with each of redsync's per-node errors
// (*redsync.RedisError) wrapped in a locker.NodeError naming the node's
// address, so that errors.Is(err, locker.ErrUnavailable) holds and the
// message says which server failed; redsync's errors stay inside.
func (l *Locker) nodeErrors(err error) error {
	parts := flatten(err)
	changed := false
	for i, e := range parts {
		var re *rs.RedisError
		if errors.As(e, &re) {
			node := fmt.Sprintf("#%d", re.Node)
			if re.Node >= 0 && re.Node < len(l.addrs) {
				node = l.addrs[re.Node]
			}
			parts[i], changed = &locker.NodeError{Node: node, Err: e}, true
		}
	}
	if !changed {
		return err
	}
	return errors.Join(parts...)
}

// flatten lists the leaves of a tree of errors.Join errors.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// withCtx adds ctx's error to err when ctx has ended and err does not
// already say so: redsync reports a cancelled wait as ErrFailed.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}
