package redlock

import (
	"strings"

	"github.com/lockbench/lockbench/locker"
)

// The keys Redlock keeps on the nodes besides the lock keys themselves.
// A lock's key is its name, as the user gave it; everything else lives
// under reserved, a prefix that starts with a NUL byte and that lock names
// may not have, so no lock name can reach them: a lock named "x:token" is
// a lock like any other, not the fencing counter of "x".
const reserved = "\x00redlock:"

const (
	// nodeKey is, on every node, the node's state: a hash whose field
	// markerField is the marker — the run_id of the server process the
	// clients have admitted to the quorum, the largest max TTL in ms of
	// the clients that took leases there, and how many keys that process
	// had evicted when it was admitted (see quarantine.go) — and, with the
	// restart quarantine, one field per lock key granted there: when the
	// grant expires (node time, ms) and its value, so that a lock key that
	// vanished before then is known to be lost.
	nodeKey = reserved + "node"
	// markerField is the marker's field in nodeKey: the prefix itself, a
	// name no lock key may have.
	markerField = reserved
	// lostKey records when a client first found the node not admitted,
	// which starts its quarantine.
	lostKey = reserved + "lost"
	// tokenPrefix + key is the key's fencing counter.
	tokenPrefix = reserved + "token:"
	// waitersPrefix + key orders the key's waiters by arrival, and
	// deadlinesPrefix + key holds when each loses its place.
	waitersPrefix   = reserved + "waiters:"
	deadlinesPrefix = reserved + "deadlines:"
	// asksPrefix + key holds what each of the key's waiters asks for: its
	// TTL and the value of its last try, with which a release hands the
	// key over (see handoff.go).
	asksPrefix = reserved + "asks:"
	// wakePrefix + a Redlock's id is the list on which releases wake it.
	wakePrefix = reserved + "wake:"
	// reservedValue + a Redlock's id is the value of a key that a release
	// reserved for that Redlock's waiter; lock values are hex, so a
	// reservation is never mistaken for a holder's value.
	reservedValue = "reserved:"
	// handedValue + the value of a waiter's try is the value of a key that
	// a release handed to that waiter: never the value of a try itself, so
	// that releasing what a failed try set never frees a hand-off.
	handedValue = "handed:"
)

// checkKey refuses a lock name in the reserved namespace.
func checkKey(key string) error {
	if strings.HasPrefix(key, reserved) {
		return locker.Invalidf("key %q: names starting with %q are reserved for Redlock's own keys", key, reserved)
	}
	return nil
}
