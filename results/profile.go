package results

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Profile describes the service a run answers for: what the team wants of
// its lock, what it already runs, and the load and faults its service
// sees. lockbench advise builds it from flags or a YAML file and records
// it in results.json; the decision procedure reads it. A zero Profile is
// make bench's default: both intents, every registered backend, the
// suite's own load.
type Profile struct {
	// Intent is what the lock is for: IntentEfficiency (a double grant
	// costs duplicated work), IntentCorrectness (a double grant corrupts
	// data) or IntentBoth; empty means IntentBoth.
	Intent string `json:"intent,omitempty"`
	// Have lists the server kinds the team already runs (redis, sentinel,
	// postgres, zookeeper, etcd): a candidate on one of them adds no
	// infrastructure; the others are suggested only as "you would add".
	// Empty means the answer does not weigh infrastructure.
	Have []string `json:"have,omitempty"`
	// Backends lists the candidate specs; empty means every registered
	// backend.
	Backends []string `json:"backends,omitempty"`
	// Hold is the time a holder keeps the lock.
	Hold HoldTime `json:"hold,omitzero"`
	// TTL is the lease the service asks for; AutoExtend says the lease's
	// own watchdog extends it while its holder holds.
	TTL        Duration `json:"ttl,omitempty"`
	AutoExtend bool     `json:"auto_extend,omitempty"`
	// Clients is the number of client processes contending for the keys.
	Clients int `json:"clients,omitempty"`
	// Keys is the number of keys locked and KeyDist how the clients pick
	// them: KeyDistHot (one hot key), KeyDistUniform or KeyDistZipf.
	Keys    int    `json:"keys,omitempty"`
	KeyDist string `json:"key_dist,omitempty"`
	// Token is what the protected resource can do with a fencing token,
	// that is the guard the answer may count on: TokenNone, TokenWrite
	// (it rejects writes with a lower token) or TokenReadWrite (reads
	// too).
	Token string `json:"token,omitempty"`
	// MaxPause is the longest stall (GC, VM) a client of the service sees.
	MaxPause Duration `json:"max_pause,omitempty"`
	// ClockStep is the largest wall-clock step the service's hosts see;
	// zero means the clock only slews.
	ClockStep Duration `json:"clock_step,omitempty"`
	// Unavailability is how long the lock may refuse grants after a fault
	// before the service suffers.
	Unavailability Duration `json:"unavailability,omitempty"`
}

// HoldTime is a hold-time distribution given by two of its percentiles;
// a fixed hold has P50 == P99.
type HoldTime struct {
	P50 Duration `json:"p50,omitempty"`
	P99 Duration `json:"p99,omitempty"`
}

// The intents of a Profile.
const (
	IntentEfficiency  = "efficiency"
	IntentCorrectness = "correctness"
	IntentBoth        = "both"
)

// The key distributions of a Profile.
const (
	KeyDistHot     = "hot"
	KeyDistUniform = "uniform"
	KeyDistZipf    = "zipf"
)

// What the protected resource can do with a fencing token (Profile.Token).
const (
	TokenNone      = "none"
	TokenWrite     = "write"
	TokenReadWrite = "read-write"
)

// Intents returns the intents the profile asks an answer for, in the
// order the answer gives them: correctness first, then efficiency.
func (p Profile) Intents() []string {
	switch p.Intent {
	case IntentCorrectness:
		return []string{IntentCorrectness}
	case IntentEfficiency:
		return []string{IntentEfficiency}
	}
	return []string{IntentCorrectness, IntentEfficiency}
}

// Duration is a time.Duration that results.json writes as Go writes a
// duration ("200ms", "1.5s") and reads back from that form or from a
// number of nanoseconds.
type Duration time.Duration

// String returns the duration as time.Duration writes it.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string such as "200ms".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads "200ms" or a number of nanoseconds (null leaves the
// duration as it was), and refuses a negative duration, naming it.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v time.Duration
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		parsed, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		v = parsed
	} else {
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return fmt.Errorf("duration %s: not a string such as \"200ms\" nor a number of nanoseconds", b)
		}
		v = time.Duration(n)
	}
	if v < 0 {
		return fmt.Errorf("duration %s: negative", v)
	}
	*d = Duration(v)
	return nil
}
