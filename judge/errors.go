package judge

import (
	"context"
	"errors"
	"fmt"
)

// The judge's errors. A caller tells them apart with errors.Is; the
// message around each names the bad value.
var (
	// ErrProtocol marks a request the judge refuses because it breaks
	// the protocol between the judge and its runners and clients: a case
	// spec that does not hold together or differs from another host's, a
	// host or client the case does not expect, a call out of order (a
	// grant before the start, a write before the read). It survives the
	// wire: the error a remote runner or client gets wraps it too.
	ErrProtocol = errors.New("judge protocol violated")
	// ErrConfig marks a bad setting of a judge or of a case: an option of
	// New, a guard's name.
	ErrConfig = errors.New("invalid setting")
	// ErrClosed: the judge was closed while the call waited (for the
	// other hosts, at the start barrier, or for the clients to finish).
	ErrClosed = errors.New("judge closed")
	// errConnLost ends the wait of a request whose connection closed: no
	// one is left to hear the reply.
	errConnLost = errors.New("its connection to the judge was lost")
)

// protocolf returns an error wrapping ErrProtocol whose message names the
// bad value.
func protocolf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// configf returns an error wrapping ErrConfig whose message names the bad
// value.
func configf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// ended says why ctx ended: its error, with its cause when the cause
// says more (the judge closed, the connection was lost).
func ended(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}
