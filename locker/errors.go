package locker

import (
	"errors"
	"fmt"
)

// The errors a Locker or Lease reports. Backends wrap them with %w and add
// the causes (per-node causes joined with errors.Join), so callers test
// them with errors.Is.
var (
	// ErrNotAcquired: the key is held by someone else, or not enough nodes
	// agreed to grant it.
	ErrNotAcquired = errors.New("lock not acquired")
	// ErrNotHeld: the operation needs a lease that is still held, and this
	// one has ended (or the backend no longer holds the key for it).
	ErrNotHeld = errors.New("lock not held")
	// ErrLost: the lease ended before it was released or expired: the
	// backend reported the key gone, a session or lease was lost, or the
	// auto-extend watchdog could not extend it in time.
	ErrLost = errors.New("lock lost")
	// ErrExpired: the lease reached ValidUntil without being extended.
	ErrExpired = errors.New("lock expired")
	// ErrReleased: the lease was released by its holder.
	ErrReleased = errors.New("lock released")
	// ErrInvalid: a caller passed a bad argument (empty key, TTL ≤ 0, ...).
	// The wrapping error names the value.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the Locker has been closed.
	ErrClosed = errors.New("locker closed")
	// ErrUnavailable: a node could not be reached or answered with an
	// error. NodeError wraps it with the node's address.
	ErrUnavailable = errors.New("node unavailable")
)

// NodeError is the failure of one node during an operation. Backends that
// talk to several nodes join one NodeError per failing node with
// errors.Join, so a caller can see which node said what.
type NodeError struct {
	// Node is the address (or name) of the node.
	Node string
	// Err is what the node answered, or why it could not be reached.
	Err error
}

// Error implements error.
func (e *NodeError) Error() string { return fmt.Sprintf("node %s: %v", e.Node, e.Err) }

// Unwrap returns the cause and ErrUnavailable, so errors.Is(err,
// ErrUnavailable) holds for any error that contains a NodeError.
func (e *NodeError) Unwrap() []error { return []error{e.Err, ErrUnavailable} }

// Invalidf returns an error wrapping ErrInvalid with a message that names
// the bad value.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
