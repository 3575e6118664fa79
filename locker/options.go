package locker

import (
	"time"
)

// DefaultTTL is the lease TTL used when no WithTTL option is given.
const DefaultTTL = 10 * time.Second

// DefaultMaxHoldFactor bounds auto-extension when no WithMaxHold option is
// given: the watchdog stops extending once a lease has been held for this
// many TTLs.
const DefaultMaxHoldFactor = 100

// Options is the resolved configuration of one acquisition. Backends get it
// from Resolve; callers build it with Option values.
type Options struct {
	// TTL is how long the key is held unless extended or released.
	TTL time.Duration
	// Retry paces Acquire's attempts; TryAcquire ignores it.
	Retry RetryStrategy
	// AutoExtend starts a watchdog that extends the lease every TTL/3 and
	// ends it with ErrLost when it cannot.
	AutoExtend bool
	// MaxHold bounds auto-extension: once a lease has been held this long
	// the watchdog stops and the lease expires at its last ValidUntil.
	// Unbounded re-extension would let a stuck holder keep a key forever.
	MaxHold time.Duration
	// Trace, when set, is told of the lease's extensions (WithTrace).
	Trace *Trace
}

// Trace holds hooks a lease calls at the moments of its life that a
// caller cannot see for itself, after net/http/httptrace: an extension
// made by the auto-extend watchdog happens in a goroutine of the lease's,
// yet whoever judges the holder must know when the lock promised it more
// time. A nil hook is not called. Hooks run synchronously in the
// goroutine that reached the moment (the watchdog's, for an
// auto-extension), after the lease has taken the outcome in: they must be
// quick, and must not call the lease.
type Trace struct {
	// Extending is called when an extension begins, by Extend or by the
	// watchdog, just before the backend is asked: Key, TTL, Auto and
	// Start are set.
	Extending func(Extension)
	// Extended is called when an extension returns, by Extend or by the
	// watchdog, whatever its outcome.
	Extended func(Extension)
}

// Extension is one extension of a lease, as Trace.Extended reports it.
type Extension struct {
	// Key is the lease's key.
	Key string
	// TTL is the time asked, from the call.
	TTL time.Duration
	// Auto is set when the auto-extend watchdog made it.
	Auto bool
	// Start and End bound the call: the backend extended the key, if it
	// did, between them.
	Start, End time.Time
	// ValidUntil is the lease's new deadline when Err is nil.
	ValidUntil time.Time
	// Err is nil when the lease was extended; it wraps ErrNotHeld when the
	// backend no longer held the key (the lease then ends with ErrLost) or
	// the lease had ended meanwhile; anything else is transient.
	Err error
}

// Option configures one acquisition.
type Option func(*Options)

// WithTTL sets the lease TTL. It must be positive.
func WithTTL(ttl time.Duration) Option { return func(o *Options) { o.TTL = ttl } }

// WithRetry sets the strategy that paces Acquire's attempts. A nil
// strategy means DefaultRetry.
func WithRetry(s RetryStrategy) Option { return func(o *Options) { o.Retry = s } }

// WithAutoExtend turns the auto-extend watchdog on or off (off by default).
func WithAutoExtend(on bool) Option { return func(o *Options) { o.AutoExtend = on } }

// WithTrace has the lease report to t (see Trace); nil reports nothing.
func WithTrace(t *Trace) Option { return func(o *Options) { o.Trace = t } }

// WithMaxHold bounds how long auto-extension may keep a lease (default
// DefaultMaxHoldFactor × TTL). It must not be negative.
func WithMaxHold(d time.Duration) Option { return func(o *Options) { o.MaxHold = d } }

// Resolve checks key and applies opts over the defaults. It returns an
// error wrapping ErrInvalid, naming the bad value, for an empty key, a TTL
// that is not positive or a negative MaxHold.
func Resolve(key string, opts ...Option) (Options, error) {
	if key == "" {
		return Options{}, Invalidf("empty key")
	}
	o := Options{TTL: DefaultTTL}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.TTL <= 0 {
		return Options{}, Invalidf("TTL %v for key %q: must be positive", o.TTL, key)
	}
	if o.MaxHold < 0 {
		return Options{}, Invalidf("max hold %v for key %q: must not be negative", o.MaxHold, key)
	}
	if o.MaxHold == 0 {
		o.MaxHold = DefaultMaxHoldFactor * o.TTL
	}
	if o.Retry == nil {
		o.Retry = DefaultRetry()
	}
	return o, nil
}
