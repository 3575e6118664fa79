// Package locker is the contract every lockbench backend implements: one
// Locker interface, the Lease it grants, the options an acquisition takes,
// the retry strategies it waits with and the errors it reports.
//
// A Lease is an immutable handle, safe for concurrent use. Like a
// context.Context it has a Done channel that is closed when the lease ends,
// and an Err that says why: ErrReleased, ErrExpired or ErrLost (wrapping the
// cause). Backends do not re-implement that lifecycle: they implement the
// small Holder interface and call NewLease, which runs the expiry timer at
// ValidUntil and, when asked, the auto-extend watchdog.
//
// The package imports nothing else of lockbench, so a library user who
// imports one backend (for instance backends/redlock) pulls in only this
// package and that backend's client.
package locker
