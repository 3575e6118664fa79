package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockbench/lockbench/locker"
)

// Observability. Redlock speaks RESP on connections of its own, so the
// hooks of go-redis (redisotel, Prometheus) never see its commands; it
// reports what it does itself, through OpenTelemetry (traces and metrics,
// the providers given by WithTracerProvider and WithMeterProvider, or the
// global ones, which do nothing until the application installs an SDK)
// and a log/slog logger (WithLogger; none by default).
//
// Spans: redlock.Acquire, redlock.TryAcquire, redlock.Extend,
// redlock.Release, redlock.Bootstrap, with the key (redlock.key), the
// rounds an Acquire sent (redlock.rounds), its fencing token and, on
// failure, the error.
//
// Metrics (instrumentation scope "github.com/lockbench/lockbench/backends/redlock"):
//
//	redlock.acquire.duration   histogram, s      per Acquire/TryAcquire; redlock.operation, redlock.outcome
//	redlock.acquire.rounds     histogram         rounds sent to the nodes per Acquire; redlock.outcome
//	redlock.release.duration   histogram, s      per Release; redlock.outcome
//	redlock.extend.duration    histogram, s      per Extend; redlock.outcome
//	redlock.node.errors        counter           a node failed a request; server.address, redlock.error
//	redlock.node.events        counter           quarantine and admission events; server.address, redlock.event
//	redlock.handoffs           counter           wake-ups of a waiter by a release in any process
//
// Log records (the same events, and what an operator must act on):
// nodes quarantined, admitted, refused for their memory policy or for
// Redlock's configuration (credentials, ACL, TLS, one server given
// twice), nodes lost and found again, releases that did not reach a
// majority. Levels: Error for configuration, Warn for data loss and
// unreachable nodes, Info for admissions, Debug for hand-offs.

// Version is this library's version, reported as the version of its
// OpenTelemetry instrumentation scope. See CHANGELOG.md for what a version
// promises.
const Version = "v0.9.0"

const scope = "github.com/lockbench/lockbench/backends/redlock"

// Outcomes of an operation, the redlock.outcome attribute.
const (
	outcomeOK          = iota // granted, extended, released
	outcomeNotAcquired        // held elsewhere, or no quorum
	outcomeCanceled           // the context ended first
	outcomeError              // anything else: closed, configuration, nodes unavailable
	outcomes
)

var outcomeNames = [outcomes]string{"ok", "not_acquired", "canceled", "error"}

// The operations an acquisition span and its measurements name.
const (
	opAcquire = iota
	opTryAcquire
)

var opNames = [...]string{opAcquire: "redlock.Acquire", opTryAcquire: "redlock.TryAcquire"}

// telemetry is where a Redlock reports what it does.
type telemetry struct {
	tracer trace.Tracer
	log    *slog.Logger

	acquire, release, extend metric.Float64Histogram
	rounds                   metric.Int64Histogram
	nodeErrors, nodeEvents   metric.Int64Counter
	handoffs                 metric.Int64Counter
	sets                     attributeSets
}

func newTelemetry(c config) (*telemetry, error) {
	tp, mp, log := c.tracerProvider, c.meterProvider, c.logger
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if log == nil {
		log = slog.New(discard{})
	}
	t := &telemetry{tracer: tp.Tracer(scope, trace.WithInstrumentationVersion(Version)), log: log, sets: newAttributeSets()}
	m := mp.Meter(scope, metric.WithInstrumentationVersion(Version))
	seconds := metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
	var errs [7]error
	t.acquire, errs[0] = m.Float64Histogram("redlock.acquire.duration", metric.WithUnit("s"), seconds,
		metric.WithDescription("Time an Acquire or TryAcquire took, granted or not."))
	t.release, errs[1] = m.Float64Histogram("redlock.release.duration", metric.WithUnit("s"), seconds,
		metric.WithDescription("Time a Release took."))
	t.extend, errs[2] = m.Float64Histogram("redlock.extend.duration", metric.WithUnit("s"), seconds,
		metric.WithDescription("Time an Extend took."))
	t.rounds, errs[3] = m.Int64Histogram("redlock.acquire.rounds", metric.WithUnit("{round}"),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100),
		metric.WithDescription("Rounds of requests to the nodes an Acquire sent."))
	t.nodeErrors, errs[4] = m.Int64Counter("redlock.node.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Requests a node failed: timed out, unreachable, refused, or answered with an error."))
	t.nodeEvents, errs[5] = m.Int64Counter("redlock.node.events", metric.WithUnit("{event}"),
		metric.WithDescription("A node quarantined (it lost its data), admitted, refused for its memory policy or the "+
			"configuration, lost or found again."))
	t.handoffs, errs[6] = m.Int64Counter("redlock.handoffs", metric.WithUnit("{handoff}"),
		metric.WithDescription("Waiters woken by a release that handed them the key."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return t, nil
}

// start begins a span for an operation on key ("" for none).
func (t *telemetry) start(ctx context.Context, name string, key ...string) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if len(key) > 0 && span.IsRecording() {
		span.SetAttributes(attribute.String("redlock.key", key[0]))
	}
	return ctx, span
}

// end ends span with err's status.
func (t *telemetry) end(span trace.Span, err error, attrs ...attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(attrs...)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// acquired ends an acquisition's span and measures it.
func (t *telemetry) acquired(ctx context.Context, span trace.Span, op int, start time.Time, rounds int, lease locker.Lease, err error) {
	oc := outcome(err)
	t.acquire.Record(ctx, time.Since(start).Seconds(), t.sets.opOutcome[op][oc])
	t.rounds.Record(ctx, int64(rounds), t.sets.outcome[oc])
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("redlock.rounds", rounds))
		if lease != nil {
			if tok, ok := lease.Token(); ok {
				span.SetAttributes(attribute.Int64("redlock.token", int64(tok)))
			}
		}
	}
	t.end(span, err)
}

// errorKind names the kind of a node's failure for the redlock.error
// attribute.
func errorKind(err error) string {
	var re redisError
	switch {
	case errors.Is(err, ErrConfig):
		return "config"
	case errors.Is(err, errTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &re):
		return "reply"
	case errors.Is(err, errConnecting):
		return "connecting"
	}
	return "unreachable"
}

// outcome classifies an operation's error for the redlock.outcome
// attribute.
func outcome(err error) int {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCanceled
	case errors.Is(err, locker.ErrNotAcquired):
		return outcomeNotAcquired
	}
	return outcomeError
}

// measure records an operation's duration on h with its outcome.
func (t *telemetry) measure(ctx context.Context, h metric.Float64Histogram, since time.Time, err error) {
	h.Record(ctx, time.Since(since).Seconds(), t.sets.outcome[outcome(err)])
}

// attributeSets are the attribute sets of the measurements, made once:
// a measurement then allocates nothing for them.
type attributeSets struct {
	outcome   [outcomes]metric.MeasurementOption
	opOutcome [len(opNames)][outcomes]metric.MeasurementOption
}

func newAttributeSets() attributeSets {
	var s attributeSets
	for oc := range outcomes {
		o := attribute.String("redlock.outcome", outcomeNames[oc])
		s.outcome[oc] = metric.WithAttributeSet(attribute.NewSet(o))
		for op, name := range opNames {
			s.opOutcome[op][oc] = metric.WithAttributeSet(attribute.NewSet(attribute.String("redlock.operation", name), o))
		}
	}
	return s
}

// nodeError counts a node's failure, of a kind (timeout, unreachable,
// refused, reply, config).
func (t *telemetry) nodeError(addr, kind string) {
	t.nodeErrors.Add(context.Background(), 1, metric.WithAttributes(attribute.String("server.address", addr),
		attribute.String("redlock.error", kind)))
}

// An event is something that changed in a node's standing, or in the
// lock's, that an operator may want to see.
type event uint8

const (
	eventQuarantined  event = iota // a node lost its data, restarted or evicted keys
	eventAdmitted                  // a node's quarantine ended: it votes again
	eventEvicts                    // a node may evict lock keys: it does not vote
	eventConfig                    // a node refused the configuration (credentials, ACL, TLS, ...)
	eventUnreachable               // a node's connection failed
	eventReachable                 // a node is reachable again
	eventBootstrapped              // Bootstrap admitted new nodes
	eventUnconfirmed               // a release did not reach a majority: retried
	eventHandoff                   // a release handed a key to a waiter here
)

var events = [...]struct {
	name  string
	level slog.Level
	msg   string
}{
	eventQuarantined: {"quarantined", slog.LevelWarn, "redlock: node lost its data, restarted or evicted keys: out of the " +
		"quorum for its quarantine"},
	eventAdmitted:     {"admitted", slog.LevelInfo, "redlock: node admitted to the quorum"},
	eventEvicts:       {"evicts", slog.LevelWarn, "redlock: node may evict lock keys (maxmemory-policy): out of the quorum"},
	eventConfig:       {"config", slog.LevelError, "redlock: node refused Redlock's configuration"},
	eventUnreachable:  {"unreachable", slog.LevelWarn, "redlock: node unreachable"},
	eventReachable:    {"reachable", slog.LevelInfo, "redlock: node reachable again"},
	eventBootstrapped: {"bootstrapped", slog.LevelInfo, "redlock: Bootstrap admitted the nodes"},
	eventUnconfirmed: {"release_unconfirmed", slog.LevelWarn, "redlock: a release did not reach a majority of the nodes: retried in the " +
		"background and by Close"},
	eventHandoff: {"handoff", slog.LevelDebug, "redlock: a release handed a key to a waiter of this process"},
}

// event reports e, about node addr ("" for the lock as a whole), with its
// cause.
func (r *Redlock) event(e event, addr string, cause error, attrs ...slog.Attr) {
	ev := events[e]
	t := r.tel
	ctx := context.Background()
	if e == eventHandoff {
		t.handoffs.Add(ctx, 1)
	} else {
		t.nodeEvents.Add(ctx, 1, metric.WithAttributes(attribute.String("server.address", addr), attribute.String("redlock.event", ev.name)))
	}
	if !t.log.Enabled(ctx, ev.level) {
		return
	}
	if addr != "" {
		attrs = append(attrs, slog.String("node", addr))
	}
	if cause != nil {
		attrs = append(attrs, slog.String("error", cause.Error()))
	}
	t.log.LogAttrs(ctx, ev.level, ev.msg, attrs...)
}

// discard is a slog.Handler that drops every record (slog.DiscardHandler
// came with Go 1.24; the module supports Go 1.22).
type discard struct{}

func (discard) Enabled(context.Context, slog.Level) bool  { return false }
func (discard) Handle(context.Context, slog.Record) error { return nil }
func (d discard) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discard) WithGroup(string) slog.Handler           { return d }
