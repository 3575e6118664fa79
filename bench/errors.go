package bench

import (
	"errors"
	"fmt"

	"github.com/lockbench/lockbench/nemesis"
)

// ErrConfig is what a run that cannot be set up as asked wraps: an
// unknown backend or bad params in its spec, a suite or matrix without a
// case, a fault that needs what its case lacks (client processes, this
// host's judge), a bad fault or load (whose own errors, nemesis.ErrFault
// and workloads.ErrSpec, it wraps beside them). The error names the
// value. A backend that refuses its params at Open says so with
// locker.ErrInvalid, the lock API's.
var ErrConfig = errors.New("bad configuration")

// ErrServers is what a case wraps when its backend's servers would not
// start (or, on the user's servers, could not be reached and prepared):
// the runner skips the case and goes on, and the CLI says at the end of
// the run which backends went unmeasured, and why.
var ErrServers = errors.New("servers would not start")

// serversError marks err, the error of starting a case's servers, with
// ErrServers: it keeps the message and wraps both.
type serversError struct{ err error }

func (e serversError) Error() string   { return e.err.Error() }
func (e serversError) Unwrap() []error { return []error{ErrServers, e.err} }

// configErrorf returns an error wrapping ErrConfig with a message that
// names the bad value.
func configErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// configError is an error of the package that owns a setting (a fault,
// a load), marked as a bad configuration of the run: it keeps the
// message and wraps both.
type configError struct{ err error }

func (e configError) Error() string   { return e.err.Error() }
func (e configError) Unwrap() []error { return []error{ErrConfig, e.err} }

// ConfigError marks err, an error of the package that owns a setting (a
// load spec, a fault, a guard), as a bad configuration of the run: the
// result wraps ErrConfig and err, with err's message. Nil stays nil.
func ConfigError(err error) error { return asConfig(err) }

// asConfig is ConfigError.
func asConfig(err error) error {
	if err == nil || errors.Is(err, ErrConfig) {
		return err
	}
	return configError{err}
}

// notApplicable is why a case's fault class cannot apply to its backend,
// as the kind or mechanism that lacks the capability says: the case is
// skipped, and the results record the reason as it is.
type notApplicable struct{ reason string }

func (e notApplicable) Error() string { return e.reason }

// inapplicable is the reason of err, a scenario's Fits error: the lacking
// capability's own reason, as the report prints it.
func inapplicable(err error) string {
	if na, ok := errors.AsType[*nemesis.Inapplicable](err); ok {
		return na.Reason
	}
	return err.Error()
}

// ErrStartBy is the cause recorded for the cases a run did not start
// because its Runner.StartBy had passed.
var ErrStartBy = errors.New("past the time to start cases by")
