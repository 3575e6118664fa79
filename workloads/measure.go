package workloads

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// errKind indexes Recorder's error counts; kinds are results' Err* names.
type errKind uint8

const (
	kindNone errKind = iota
	kindNotAcquired
	kindNode
	kindLost
	kindTimeout
	kindOther
	numKinds
)

var kindNames = [numKinds]string{"", results.ErrNotAcquired, results.ErrNode, results.ErrLost, results.ErrTimeout, results.ErrOther}

// Classify returns the kind of a failed operation, one of results' Err*
// names, or "" when err is nil or the operation was abandoned (ctx was
// cancelled, which is how a run ends, not a failure). ctx is the context
// the operation ran under; it may be nil. In order:
//
//   - timeout: ctx's deadline passed (the acquire ran out of time);
//   - lost: the error wraps locker.ErrNotHeld or locker.ErrLost (the lease
//     had ended while its holder thought it held it);
//   - node: a node failed (a locker.NodeError, or locker.ErrUnavailable);
//   - not_acquired: locker.ErrNotAcquired without a node error;
//   - timeout: a context.DeadlineExceeded inside the backend;
//   - other: anything else.
func Classify(ctx context.Context, err error) string { return kindNames[classify(ctx, err)] }

func classify(ctx context.Context, err error) errKind {
	if err == nil {
		return kindNone
	}
	if ctx != nil {
		switch ctx.Err() {
		case context.Canceled:
			return kindNone
		case context.DeadlineExceeded:
			return kindTimeout
		}
	}
	var ne *locker.NodeError
	switch {
	case errors.Is(err, locker.ErrNotHeld) || errors.Is(err, locker.ErrLost):
		return kindLost
	case errors.As(err, &ne) || errors.Is(err, locker.ErrUnavailable):
		return kindNode
	case errors.Is(err, locker.ErrNotAcquired):
		return kindNotAcquired
	case errors.Is(err, context.DeadlineExceeded):
		return kindTimeout
	}
	return kindOther
}

// maxMicros is the largest value results.NewHistogram tracks.
var maxMicros = results.NewHistogram().HighestTrackableValue()

// Recorder collects what Measure observes: HDR histograms (µs) of acquire
// wait, hold time and release latency, and failed operations by kind.
// (Grants over time are the judge's: it sees every client's.) It is safe
// for concurrent use; one mutex guards it, taken once per recorded event,
// which costs far less than the network round trip of any real lock.
type Recorder struct {
	mu                     sync.Mutex
	acquire, hold, release *hdr.Histogram
	errs                   [numKinds]int64
	firstErr               [numKinds]string // the first error of each kind, for the notes
	acquired               int64
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{acquire: results.NewHistogram(), hold: results.NewHistogram(), release: results.NewHistogram()}
}

// micros converts d to the histograms' microseconds, clamped to their
// range so that no value is dropped.
func micros(d time.Duration) int64 {
	return min(max(d.Microseconds(), 0), maxMicros)
}

func (r *Recorder) granted(wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquired++
	_ = r.acquire.RecordValue(micros(wait))
}

func (r *Recorder) failed(k errKind, err error) {
	if k == kindNone {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs[k]++
	if r.firstErr[k] == "" && err != nil {
		r.firstErr[k] = err.Error()
	}
}

// released records the first Release of a lease: hold is grant → release
// call; latency is recorded when the call reached the backend (the lease
// was still held).
func (r *Recorder) released(hold, latency time.Duration, reached bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.hold.RecordValue(micros(hold))
	if reached {
		_ = r.release.RecordValue(micros(latency))
	}
}

// Metrics is a copy of what a Recorder has collected.
type Metrics struct {
	// Acquired counts the grants.
	Acquired int64
	// Errors counts failed operations by kind (results' Err* names); kinds
	// that never happened are absent.
	Errors map[string]int64
	// FirstErrors holds the message of the first error of each kind, which
	// usually says why the others happened too.
	FirstErrors map[string]string
	// Acquire, Hold and Release are the HDR histograms, in µs.
	Acquire, Hold, Release *hdr.Histogram
}

// Metrics returns a copy of what r has collected so far.
func (r *Recorder) Metrics() Metrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := Metrics{
		Acquired:    r.acquired,
		Errors:      make(map[string]int64),
		FirstErrors: make(map[string]string),
		Acquire:     hdr.Import(r.acquire.Export()),
		Hold:        hdr.Import(r.hold.Export()),
		Release:     hdr.Import(r.release.Export()),
	}
	for k := kindNotAcquired; k < numKinds; k++ {
		if r.errs[k] > 0 {
			m.Errors[kindNames[k]] = r.errs[k]
			m.FirstErrors[kindNames[k]] = r.firstErr[k]
		}
	}
	return m
}

// Encode returns the metrics as a client sends them to the judge, with
// the histograms encoded.
func (m Metrics) Encode() (judge.Metrics, error) {
	out := judge.Metrics{Acquired: m.Acquired, Errors: m.Errors, FirstErrors: m.FirstErrors}
	var err error
	if out.Histograms.Acquire, err = results.Encode(m.Acquire); err != nil {
		return out, fmt.Errorf("encode acquire histogram: %w", err)
	}
	if out.Histograms.Hold, err = results.Encode(m.Hold); err != nil {
		return out, fmt.Errorf("encode hold histogram: %w", err)
	}
	if out.Histograms.Release, err = results.Encode(m.Release); err != nil {
		return out, fmt.Errorf("encode release histogram: %w", err)
	}
	return out, nil
}

// Measured is a Locker that records every operation of the Locker it
// wraps into a Recorder. The measuring lives here, in a decorator, so
// that no backend carries metrics code and every backend is measured the
// same way. It is safe for concurrent use if the wrapped Locker is.
type Measured struct {
	inner locker.Locker
	rec   *Recorder
}

var _ locker.Locker = (*Measured)(nil)

// Measure wraps l so that its operations are recorded into r: acquire
// wait, hold time (grant → Release call), release latency, grants over
// time, and failures by kind (see Classify). A lease that ends by loss
// while held, or whose Release or Extend says it was no longer held,
// counts one lost error; Measure notices at Release or Extend.
func Measure(l locker.Locker, r *Recorder) *Measured { return &Measured{inner: l, rec: r} }

// Unwrap returns the wrapped Locker.
func (m *Measured) Unwrap() locker.Locker { return m.inner }

// Acquire implements locker.Locker; the wait is measured from the call.
func (m *Measured) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return m.AcquireFrom(ctx, time.Now(), key, opts...)
}

// AcquireFrom is Acquire with the wait measured from start, the time the
// operation was meant to begin. An open loop passes each arrival's
// scheduled time, so the time a request spent queued behind busy clients
// counts in its latency (no coordinated omission).
func (m *Measured) AcquireFrom(ctx context.Context, start time.Time, key string, opts ...locker.Option) (locker.Lease, error) {
	l, err := m.inner.Acquire(ctx, key, opts...)
	return m.done(ctx, start, l, err)
}

// TryAcquire implements locker.Locker.
func (m *Measured) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	start := time.Now()
	l, err := m.inner.TryAcquire(ctx, key, opts...)
	return m.done(ctx, start, l, err)
}

func (m *Measured) done(ctx context.Context, start time.Time, l locker.Lease, err error) (locker.Lease, error) {
	if err != nil {
		m.rec.failed(classify(ctx, err), err)
		return nil, err
	}
	now := time.Now()
	m.rec.granted(now.Sub(start))
	return &measuredLease{Lease: l, m: m, granted: now}, nil
}

// Info implements locker.Locker.
func (m *Measured) Info() locker.Info { return m.inner.Info() }

// Close implements locker.Locker.
func (m *Measured) Close() error { return m.inner.Close() }

// measuredLease records the Release and Extend of one lease.
type measuredLease struct {
	locker.Lease
	m       *Measured
	granted time.Time

	mu       sync.Mutex
	lost     bool // a lost error has been counted for this lease
	released bool // Release has been called: its hold is recorded
}

func (l *measuredLease) Release(ctx context.Context) error {
	before := l.Lease.Err()
	start := time.Now()
	err := l.Lease.Release(ctx)
	end := time.Now()
	l.mu.Lock()
	first := !l.released
	l.released = true
	l.mu.Unlock()
	if first {
		l.m.rec.released(start.Sub(l.granted), end.Sub(start), before == nil)
	}
	l.fail(ctx, before, err)
	return err
}

func (l *measuredLease) Extend(ctx context.Context, ttl time.Duration) error {
	before := l.Lease.Err()
	err := l.Lease.Extend(ctx, ttl)
	l.fail(ctx, before, err)
	return err
}

// fail counts the failure of a Release or Extend; ended is the lease's
// Err before the call. A lease counts as lost at most once.
func (l *measuredLease) fail(ctx context.Context, ended, err error) {
	k := classify(ctx, err)
	if err == nil && errors.Is(ended, locker.ErrLost) {
		k = kindLost // lost while held, though the call itself succeeded
	}
	if k == kindLost {
		l.mu.Lock()
		counted := l.lost
		l.lost = true
		l.mu.Unlock()
		if counted {
			return
		}
	}
	if err == nil {
		err = ended
	}
	l.m.rec.failed(k, err)
}
