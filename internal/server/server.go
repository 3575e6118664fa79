// Package server holds the words that the package starting lockbench's
// servers (compose) and the one breaking them (nemesis) share, so that
// neither imports the other for them: what a start that failed means, and
// what a power loss dropped. compose's ErrExited, ErrNotReady and Unsynced
// are these, under compose's names, as os.FileInfo is io/fs's.
package server

import "errors"

// ErrExited is wrapped by the error of a start whose server process
// exited before it was ready: the server refused to run — its data (etcd
// refusing a torn WAL, a PostgreSQL PANIC on a missing control file), its
// config, its port. The error carries the last lines of the server's log,
// which say why.
var ErrExited = errors.New("exited before it was ready")

// ErrNotReady is wrapped, beside the context's error, by the error of a
// start whose server still ran when the wait for it ended: it was slow — a
// loaded machine, a log to replay — or its readiness could not be seen
// (its clients cut off). The harness gave up on it; the server refused
// nothing.
var ErrNotReady = errors.New("was still running but not ready")

// Unsynced is what a lazy filesystem holds in memory only: the writes,
// truncations and allocations its servers made and did not sync, which a
// power loss drops.
type Unsynced struct {
	// Files counts the files with unsynced changes.
	Files int
	// Bytes is the size of their unsynced writes, in whole 4 KiB pages (a
	// truncation counts no bytes).
	Bytes int64
}
