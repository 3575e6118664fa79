package redlock

import (
	"strings"

	"github.com/lockbench/lockbench/locker"
)

// DefaultKeyPrefix is the prefix of the keys Redlock keeps on the nodes
// besides the lock keys themselves (see WithKeyPrefix). It starts with a
// NUL byte, which lock names rarely have.
const DefaultKeyPrefix = "\x00redlock:"

// keyspace is where Redlock keeps its own keys on the nodes. A lock's key
// is its name, as the user gave it; everything else lives under prefix,
// which lock names may not have, so no lock name can reach them: a lock
// named "x:token" is a lock like any other, not the fencing counter of "x".
type keyspace struct {
	prefix string
	// node is, on every node, the node's state: a hash whose field marker
	// is the marker — the run_id of the server process the clients have
	// admitted to the quorum, the largest max TTL in ms of the clients
	// that took leases there, and how many keys that process had evicted
	// when it was admitted (see quarantine.go) — and, with the restart
	// quarantine, one field per lock key granted there: when the grant
	// expires (node time, ms) and its value, so that a lock key that
	// vanished before then is known to be lost. The scripts find the
	// marker's field from node's name (node without its "node" suffix).
	node string
	// marker is the marker's field in node: the prefix itself, a name no
	// lock key may have.
	marker string
	// lost records when a client first found the node not admitted,
	// which starts its quarantine.
	lost string
	// token + key is the key's fencing counter.
	token string
	// waiters + key orders the key's waiters by arrival, and deadlines +
	// key holds when each loses its place.
	waiters, deadlines string
	// asks + key holds what each of the key's waiters asks for: its TTL
	// and the value of its last try, with which a release hands the key
	// over (see handoff.go).
	asks string
	// wake + a Redlock's id is the list on which releases wake it.
	wake string
}

func newKeyspace(prefix string) keyspace {
	return keyspace{
		prefix:    prefix,
		node:      prefix + "node",
		marker:    prefix,
		lost:      prefix + "lost",
		token:     prefix + "token:",
		waiters:   prefix + "waiters:",
		deadlines: prefix + "deadlines:",
		asks:      prefix + "asks:",
		wake:      prefix + "wake:",
	}
}

// Values Redlock sets on lock keys besides a holder's value.
const (
	// reservedValue + a Redlock's id is the value of a key that a release
	// reserved for that Redlock's waiter; lock values are hex, so a
	// reservation is never mistaken for a holder's value.
	reservedValue = "reserved:"
	// handedValue + the value of a waiter's try is the value of a key that
	// a release handed to that waiter: never the value of a try itself, so
	// that releasing what a failed try set never frees a hand-off.
	handedValue = "handed:"
)

// checkKey refuses a lock name in Redlock's own namespace.
func (k *keyspace) checkKey(key string) error {
	if strings.HasPrefix(key, k.prefix) {
		return locker.Invalidf("key %q: names starting with %q are reserved for Redlock's own keys (WithKeyPrefix)", key, k.prefix)
	}
	return nil
}

// checkPrefix refuses a key prefix under which Redlock's keys could be
// taken for lock keys: the empty one (a lock named "node" would be the
// node's state). Any other prefix keeps the two apart, because lock names
// that start with it are refused (checkKey).
func checkPrefix(prefix string) error {
	if prefix == "" {
		return locker.Invalidf("key prefix %q: must not be empty, or Redlock's own keys (such as %q) would be names any lock may have",
			prefix, "node")
	}
	return nil
}
