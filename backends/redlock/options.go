package redlock

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockbench/lockbench/locker"
)

// Defaults of the options.
const (
	// DefaultMaxTTL is the longest TTL a lease may ask for, and the length
	// of a node's quarantine after it lost its data.
	DefaultMaxTTL = time.Minute
	// DefaultDrift is the clock drift allowance: validity loses TTL×drift
	// (plus 2 ms).
	DefaultDrift = 0.01
)

// Option configures a Redlock. Options may be given in any order; an
// option given twice takes its last value.
type Option func(*options) error

// setting is an on/off option that may also be left unset, so that one
// option's default can depend on another's value whatever their order.
type setting uint8

const (
	unset setting = iota
	on
	off
)

func settingOf(b bool) setting {
	if b {
		return on
	}
	return off
}

type options struct {
	fencing      setting
	clockFloor   setting
	quarantine   setting
	quorumFirst  bool
	maxTTL       time.Duration
	drift        float64
	nodeTimeout  time.Duration // 0: scaled from the TTL
	waitReplicas int
	waitTimeout  time.Duration
	keyPrefix    string
	clock        func() time.Time
	telemetryOptions
}

// telemetryOptions is where a Redlock reports what it does (see
// telemetry.go); nil: the global OpenTelemetry providers, no logger.
type telemetryOptions struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	logger         *slog.Logger
}

// config is the options once resolved: what a Redlock runs with.
type config struct {
	fencing      bool
	clockFloor   bool
	quarantine   bool
	quorumFirst  bool
	maxTTL       time.Duration
	drift        float64
	nodeTimeout  time.Duration
	waitReplicas int
	waitTimeout  time.Duration
	keyPrefix    string
	// clock is what a lease's validity is measured on: time.Now unless
	// WithClock says otherwise.
	clock func() time.Time
	telemetryOptions
}

// resolve applies opts and settles the options that depend on others.
func resolve(opts []Option) (config, error) {
	o := options{maxTTL: DefaultMaxTTL, drift: DefaultDrift, keyPrefix: DefaultKeyPrefix}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return config{}, err
		}
	}
	if o.fencing == off && o.clockFloor == on {
		return config{}, locker.Invalidf("WithClockFloor(true) with WithFencing(false): the clock floor raises fencing tokens, which are off")
	}
	c := config{
		fencing:          o.fencing == on || o.clockFloor == on,
		quarantine:       o.quarantine != off,
		quorumFirst:      o.quorumFirst,
		maxTTL:           o.maxTTL,
		drift:            o.drift,
		nodeTimeout:      o.nodeTimeout,
		waitReplicas:     o.waitReplicas,
		waitTimeout:      o.waitTimeout,
		keyPrefix:        o.keyPrefix,
		clock:            o.clock,
		telemetryOptions: o.telemetryOptions,
	}
	c.clockFloor = c.fencing && o.clockFloor != off
	return c, nil
}

// WithFencing makes every lease carry a fencing token: a per-key counter
// on each node, advanced by every grant there; the lease's token is the
// maximum over the majority that granted it, written back to a majority
// before Acquire returns, so any later grant, whose majority overlaps this
// one, returns a larger token. A counter lives as long as its node's data:
// a majority of nodes that lost their data (the quarantine keeps them from
// granting a held lock, not from forgetting their counters) would hand
// out small tokens again, so by default every token is also raised to at
// least the acquiring client's clock in microseconds (see WithClockFloor).
// Off by default.
func WithFencing(enable bool) Option {
	return func(o *options) error { o.fencing = settingOf(enable); return nil }
}

// WithClockFloor, on by default with fencing, raises every token to at
// least the acquiring client's clock in microseconds (the same floor for
// every node of a grant, so they agree on the token and need no write
// back). That is why tokens look like timestamps by default, and what it
// buys: nodes that lost their counters (a majority restarted empty, or
// flushed, counts from 1 again) still hand out tokens above the ones
// issued before, as long as the clients' clocks do not disagree by more
// than the time between two grants of a key (NTP keeps them within
// milliseconds; a restart takes seconds); and the counters may expire
// (ten max TTLs, at least ten seconds, after a key's last grant), so that
// every lock name does not leave a key on every node for ever.
// WithClockFloor(false) leaves plain counters (1, 2, 3, ...), which never
// expire and which only persistence (appendfsync always) keeps
// increasing across restarts. WithClockFloor(true) implies
// WithFencing(true), and contradicts an explicit WithFencing(false).
func WithClockFloor(enable bool) Option {
	return func(o *options) error { o.clockFloor = settingOf(enable); return nil }
}

// WithQuarantine turns the restart quarantine on or off (on by default):
// a node that lost its data (it restarted, was flushed, lost its
// admission marker, or evicted keys) stays out of the quorum for one max
// TTL after the loss is detected, so that it cannot grant a lock it
// forgot. It needs the INFO command (ACL: +info) and maxmemory-policy
// noeviction on every node, and new nodes need Bootstrap once. Without it,
// a majority of nodes that lose their data can grant a held lock again.
func WithQuarantine(enable bool) Option {
	return func(o *options) error { o.quarantine = settingOf(enable); return nil }
}

// WithQuorumFirst makes a try ask a quorum of the nodes first — the
// key's queue nodes when they answer — and the others only when one of
// those refuses or fails; off by default: every try asks every node, and
// waits for a majority. It trades a margin of safety for speed. A grant
// then sets the key on a bare majority instead of on every node that
// answered, so that a node of that majority that forgets the key (its
// clock jumps forward, it restarts with the restart quarantine off, a
// fault nothing detects) lets another client assemble a majority with
// the nodes that never had it; with every node asked, an uncontended
// grant survives two such nodes of five. (So does a key handed from one
// waiter to the next: it lives on every node that answers without this
// option, on its queue nodes, a bare majority, with it.)
// What it buys: an Acquire and Release make three of five nodes run a
// script instead of five, and a refused try sets the key nowhere, so
// there is nothing to release (measured in the repository's
// docs/measurements.md). A node of a key's first quorum that hangs costs the
// tries that were waiting for it up to the node timeout, once; after
// that it is not answering, and the tries ask the others first.
func WithQuorumFirst(enable bool) Option {
	return func(o *options) error { o.quorumFirst = enable; return nil }
}

// WithMaxTTL sets the longest TTL a lease may have (DefaultMaxTTL), which
// is also how long a node that lost its data is kept out of the quorum.
// Clients of the same nodes may use different values: each grant records
// its client's on the nodes, every quarantine lasts the largest recorded,
// and a client admits a node that served its quarantine only once it has
// read the records of every node, or of a quorum of admitted nodes (a
// client with a short max TTL that cannot reach the records of a longer
// one waits). See the package documentation for the cases it cannot
// cover.
func WithMaxTTL(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond {
			return locker.Invalidf("max TTL %v: must be at least 1ms", d)
		}
		o.maxTTL = d
		return nil
	}
}

// WithDrift sets the clock drift factor (DefaultDrift): a lease's
// validity is its TTL minus the time the grant took minus TTL×drift+2ms.
func WithDrift(f float64) Option {
	return func(o *options) error {
		if !(f >= 0 && f < 0.5) {
			return locker.Invalidf("drift %v: must be in [0, 0.5)", f)
		}
		o.drift = f
		return nil
	}
}

// WithClock sets the clock a lease's validity is measured on: the start
// of each try, and the checks, when a grant or an extension returns, that
// its validity has not run out. Redlock's safety assumes that this clock
// counts all the time that passes (bounded drift, WithDrift); WithClock
// is for tests of a client whose clock does not — a virtual machine
// suspended in the middle of an Acquire, whose monotonic clock did not
// count the suspension. Its readings must carry a monotonic reading, as
// time.Now's (and Add's on them) do. A lease's ValidUntil stays in
// time.Now's terms: what is left of its validity by this clock, from
// time.Now. Everything else (node timeouts, health, grant records) keeps
// time.Now. nil, the default, is time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) error { o.clock = now; return nil }
}

// WithNodeTimeout sets how long a round waits for each node. By default
// it is TTL/50, between 20 ms and 50 ms: far below the TTL, so a dead
// node cannot eat the validity, and enough for a loaded machine. A grant
// round ends as soon as a majority has granted, and connections are
// dialled in the background with the client's DialTimeout, so a slow or
// dead minority does not delay a grant, from the first one on (with
// WithQuorumFirst, once it is known not to answer); a refusal
// that queues waits up to this timeout for the other nodes that were
// answering.
func WithNodeTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return locker.Invalidf("node timeout %v: must be positive", d)
		}
		o.nodeTimeout = d
		return nil
	}
}

// WithWait makes every grant wait, with Redis WAIT, until replicas
// replicas of the node acknowledged the lock, for at most timeout; a node
// whose replicas do not acknowledge in time does not count. It is meant
// for masters that have replicas (Sentinel): it narrows, but does not
// close, the window in which a failover loses a lock, because WAIT does
// not make replication synchronous. WAIT blocks the connection it is sent
// on, so grants that wait use a second connection per node: Extend and
// Release never queue behind them, but grants do queue behind each other
// on it (a grant whose replicas are slow delays the next grant by up to
// timeout).
func WithWait(replicas int, timeout time.Duration) Option {
	return func(o *options) error {
		if replicas < 0 || timeout < 0 {
			return locker.Invalidf("wait for %d replicas within %v: must not be negative", replicas, timeout)
		}
		if replicas > 0 && timeout < time.Millisecond {
			// WAIT n 0 blocks until the replicas answer, however long.
			return locker.Invalidf("wait for %d replicas within %v: the timeout must be at least 1ms", replicas, timeout)
		}
		o.waitReplicas, o.waitTimeout = replicas, timeout
		return nil
	}
}

// WithTracerProvider sets where Redlock's spans go (see the package
// documentation, Observability). By default, or given nil, it uses the
// global provider (otel.GetTracerProvider), which records nothing until
// the application installs an SDK.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error { o.tracerProvider = tp; return nil }
}

// WithMeterProvider sets where Redlock's metrics go (see the package
// documentation, Observability). By default, or given nil, it uses the
// global provider (otel.GetMeterProvider), which records nothing until the
// application installs an SDK.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error { o.meterProvider = mp; return nil }
}

// WithLogger sets the logger of the events an operator may need to see: a
// node that lost its data, is admitted again, may evict keys, refuses
// Redlock's credentials or commands, is unreachable; a release that did
// not reach a majority. By default, or given nil, Redlock logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.logger = l; return nil }
}

// WithKeyPrefix sets the prefix of the keys Redlock keeps on the nodes
// besides the lock keys (DefaultKeyPrefix): the node's state and
// admission marker, the record of a detected loss, fencing counters, wait
// queues and wake-up lists. Lock names that start with it are refused, so
// a lock key is never one of Redlock's own; the empty prefix is refused.
// Every client of the same nodes must use the same prefix: clients with
// different prefixes still exclude each other on a lock key, but they do
// not share quarantine markers, fencing counters or wait queues, so a
// node that one of them admitted is new to the other (it needs Bootstrap,
// or one max TTL), and tokens and hand-offs are not ordered across them.
// Use it to give Redlock keys an application's ACL key pattern allows
// (for example "app:redlock:" with ~app:*), not to run two lock services
// on the same nodes.
func WithKeyPrefix(prefix string) Option {
	return func(o *options) error {
		if err := checkPrefix(prefix); err != nil {
			return err
		}
		o.keyPrefix = prefix
		return nil
	}
}
