package compose

import (
	"errors"
	"fmt"
)

// Durability is when a server makes a write durable: what it keeps if its
// machine loses power (Node.PowerLoss) rather than only its process (Kill
// keeps the kernel's page cache, so a killed server loses nothing it
// wrote, fsynced or not). Every server kind takes one in its Spec:
//
//	            fast                    periodic                              durable
//	Redis       no persistence          appendonly, appendfsync everysec      appendonly, appendfsync always
//	PostgreSQL  fsync=off,              fsync=on, synchronous_commit=off      fsync=on, synchronous_commit=on
//	            synchronous_commit=off  (the WAL writer flushes every 200 ms)
//	ZooKeeper   forceSync=no            none: the log is fsynced at every     forceSync=yes
//	                                    commit or never
//	etcd        --unsafe-no-fsync       none: the WAL is fsynced at every     fsync (the default)
//	                                    raft write or never
//
// Asking ZooKeeper or etcd for periodic is an error that wraps
// ErrNoDurability.
type Durability string

const (
	// DurabilityFast syncs nothing: every write since the server started
	// is lost with the power (all of them for Redis, which then keeps
	// nothing on disk at all).
	DurabilityFast Durability = "fast"
	// DurabilityPeriodic syncs in the background, about once a second
	// (Redis) or every few hundred milliseconds (PostgreSQL's WAL
	// writer): a power loss takes the last moment's acknowledged writes.
	DurabilityPeriodic Durability = "periodic"
	// DurabilityDurable syncs every write before acknowledging it: a
	// power loss takes nothing acknowledged.
	DurabilityDurable Durability = "durable"
)

// ErrNoDurability is wrapped by the error of a server kind asked for a
// durability profile it has no setting for.
var ErrNoDurability = errors.New("no such durability setting")

// Durabilities lists the profiles, fastest first.
func Durabilities() []Durability {
	return []Durability{DurabilityFast, DurabilityPeriodic, DurabilityDurable}
}

// ParseDurability returns the profile named s.
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(s); d {
	case DurabilityFast, DurabilityPeriodic, DurabilityDurable:
		return d, nil
	}
	return "", fmt.Errorf("compose: durability %q: want fast, periodic or durable", s)
}

// durability resolves a kind's option: d when set, else the kind's
// default def.
func durability(d, def Durability) (Durability, error) {
	if d == "" {
		return def, nil
	}
	return ParseDurability(string(d))
}
