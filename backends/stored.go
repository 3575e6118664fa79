package backends

import (
	"context"
	"fmt"
	"time"
)

// Stored is what one server holds of a case's keys, as the server itself
// reports it: what a fault's effect is read back from (keys gone after a
// restart without data, kept after a durable one; a key's remaining life
// moved by a clock jump).
type Stored struct {
	// Records counts what the server keeps for the keys: lock keys,
	// fencing counters, queue entries, lease rows, locks held.
	Records int
	// Expiring counts the records that expire by themselves (a TTL, a
	// lease row's expiry).
	Expiring int
	// TTL is the shortest remaining life among the expiring records, by
	// the server's own clock (valid when Expiring > 0).
	TTL time.Duration
	// Items identify the records: each one's name and a fingerprint of
	// its content (a lock's value, a queue entry's sequence, a row's
	// holder and token), so that a record rewritten by another client
	// after a fault is not taken for the one the server kept.
	Items map[string]string
}

// Kept counts the records of before that s still holds as they were.
func (s Stored) Kept(before Stored) int {
	n := 0
	for k, v := range before.Items {
		if w, ok := s.Items[k]; ok && w == v {
			n++
		}
	}
	return n
}

// String says it in a few words: "3 records (1 expiring, in 1.42s)".
func (s Stored) String() string {
	if s.Expiring == 0 {
		return fmt.Sprintf("%d records", s.Records)
	}
	return fmt.Sprintf("%d records (%d expiring, the first in %v)", s.Records, s.Expiring, s.TTL.Round(time.Millisecond))
}

// Add counts one record named name with content fingerprint print.
func (s *Stored) Add(name, print string) {
	if s.Items == nil {
		s.Items = map[string]string{}
	}
	s.Items[name] = print
	s.Records = len(s.Items)
}

// A Prober reads what the server at cfg.Addrs[0] (that server alone: a
// member's own copy, not the cluster's answer) holds for the keys that
// contain substr (a case's key prefix, or one key's full name). It is a
// backend's knowledge of how it stores its keys, which nobody else has.
type Prober func(ctx context.Context, cfg Config, substr string) (Stored, error)
