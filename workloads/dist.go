package workloads

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// distKind is the shape of a Dist.
type distKind uint8

const (
	distConstant distKind = iota
	distUniform
	distExponential
)

// maxExpFactor caps an exponential sample at this many means, so that one
// freak draw cannot stall a client for the whole run (the probability of
// reaching it is e^-50).
const maxExpFactor = 50

// Dist is a distribution of durations: the hold time of a critical section
// or the think time between two sections of a client. Real services do
// not hold a lock for a constant time, and the spread changes how often
// holders collide and how long waiters wait, so the workloads let the
// caller pick one. The zero value is the constant 0.
type Dist struct {
	kind distKind
	a, b time.Duration // constant: a; uniform: [a, b]; exponential: mean a
}

// Constant returns the distribution that is always d.
func Constant(d time.Duration) (Dist, error) {
	if d < 0 {
		return Dist{}, specErrorf("constant duration %v: must not be negative", d)
	}
	return Dist{kind: distConstant, a: d}, nil
}

// Uniform returns the uniform distribution on [lo, hi].
func Uniform(lo, hi time.Duration) (Dist, error) {
	if lo < 0 || hi < lo {
		return Dist{}, specErrorf("uniform %v-%v: need 0 ≤ low ≤ high", lo, hi)
	}
	return Dist{kind: distUniform, a: lo, b: hi}, nil
}

// Exponential returns the exponential distribution with the given mean,
// the memoryless spread of service times (samples are capped at 50 means).
func Exponential(mean time.Duration) (Dist, error) {
	if mean <= 0 {
		return Dist{}, specErrorf("exponential mean %v: must be positive", mean)
	}
	return Dist{kind: distExponential, a: mean}, nil
}

// ParseDist parses a distribution as the CLI writes it: "2ms" (constant),
// "1ms-5ms" (uniform between the two) or "exp:2ms" (exponential with mean
// 2ms). Durations use time.ParseDuration's syntax; a bare "0" is zero. The
// error names the bad input.
func ParseDist(s string) (Dist, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return Dist{}, specErrorf("duration distribution %q: empty (want e.g. 2ms, 1ms-5ms or exp:2ms)", s)
	}
	if mean, ok := strings.CutPrefix(in, "exp:"); ok {
		m, err := parseDuration(s, mean)
		if err != nil {
			return Dist{}, err
		}
		d, err := Exponential(m)
		if err != nil {
			return Dist{}, specErrorf("duration distribution %q: exponential mean must be positive", s)
		}
		return d, nil
	}
	// A '-' after the first character separates the bounds of a uniform
	// distribution; a leading '-' is a negative duration.
	if i := strings.Index(in[1:], "-"); i >= 0 {
		lo, err := parseDuration(s, in[:i+1])
		if err != nil {
			return Dist{}, err
		}
		hi, err := parseDuration(s, in[i+2:])
		if err != nil {
			return Dist{}, err
		}
		d, err := Uniform(lo, hi)
		if err != nil {
			return Dist{}, specErrorf("duration distribution %q: uniform bounds must satisfy 0 ≤ low ≤ high", s)
		}
		return d, nil
	}
	c, err := parseDuration(s, in)
	if err != nil {
		return Dist{}, err
	}
	return Constant(c)
}

// parseDuration parses one duration of the distribution whole.
func parseDuration(whole, part string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(part))
	if err != nil {
		return 0, specErrorf("duration distribution %q: %q is not a duration (want e.g. 2ms, 1ms-5ms or exp:2ms)", whole, part)
	}
	if d < 0 {
		return 0, specErrorf("duration distribution %q: %v is negative", whole, d)
	}
	return d, nil
}

// Sample draws one duration from d using r.
func (d Dist) Sample(r *rand.Rand) time.Duration {
	switch d.kind {
	case distUniform:
		if d.b == d.a {
			return d.a
		}
		return d.a + time.Duration(r.Int64N(int64(d.b-d.a)+1))
	case distExponential:
		x := min(r.ExpFloat64(), maxExpFactor)
		return time.Duration(x * float64(d.a))
	default:
		return d.a
	}
}

// Mean is the expected value of d.
func (d Dist) Mean() time.Duration {
	switch d.kind {
	case distUniform:
		return d.a + (d.b-d.a)/2
	default:
		return d.a
	}
}

// Max is the largest value d can take (for an exponential, its cap of 50
// means), so a caller can tell whether a hold may outlast a TTL.
func (d Dist) Max() time.Duration {
	switch d.kind {
	case distUniform:
		return d.b
	case distExponential:
		return maxExpFactor * d.a
	default:
		return d.a
	}
}

// String returns d in the syntax ParseDist reads.
func (d Dist) String() string {
	switch d.kind {
	case distUniform:
		return fmt.Sprintf("%v-%v", d.a, d.b)
	case distExponential:
		return "exp:" + d.a.String()
	default:
		return d.a.String()
	}
}

// MarshalText implements encoding.TextMarshaler, so a Dist can be a flag
// (flag.TextVar) or a JSON/YAML field.
func (d Dist) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseDist.
func (d *Dist) UnmarshalText(b []byte) error {
	v, err := ParseDist(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
