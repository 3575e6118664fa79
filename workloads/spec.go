package workloads

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// ErrSpec is what a load that cannot run wraps: a bad field of a Spec, a
// duration distribution that does not parse, clients that do not match
// their spec. The error names the value.
var ErrSpec = errors.New("bad load spec")

// specErrorf returns an error wrapping ErrSpec with a message that names
// the bad value.
func specErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSpec, fmt.Sprintf(format, args...))
}

// Workload names how clients choose the key of each critical section. The
// choice sets the contention: one hot key serialises every client, many
// uniform keys barely collide, a zipf skew is the realistic middle.
type Workload string

// The workloads.
const (
	// Hot puts every client on one key: maximal contention, the case where
	// mutual exclusion is tested hardest.
	Hot Workload = "hot"
	// UniformKeys spreads sections uniformly over Spec.Keys keys.
	UniformKeys Workload = "uniform"
	// Zipf skews sections over Spec.Keys keys with P(rank k) ∝ (1+k)^-s
	// (s = Spec.ZipfS), so a few keys are hot and most are cold.
	Zipf Workload = "zipf"
)

// Defaults applied by Spec.Normalize to zero fields.
const (
	// DefaultDuration bounds a run that names no duration: long enough
	// for stable percentiles, short enough for a matrix of cases.
	DefaultDuration = 10 * time.Second
	// DefaultAcquireTimeout bounds each acquire, so a stuck backend shows
	// up as timeouts instead of a silent stall.
	DefaultAcquireTimeout = 5 * time.Second
	// DefaultZipfS is the zipf skew: the top 3 of 100 keys take about 40%
	// of the sections.
	DefaultZipfS = 1.1
	// DefaultKeyPrefix starts every key lockbench locks.
	DefaultKeyPrefix = "lockbench:"
	// MaxKeys bounds Spec.Keys: every key name is built up front, and a
	// million keys already leaves each one nearly uncontended.
	MaxKeys = 1_000_000
	// MaxRate bounds an open loop's rate: far beyond what one load
	// generator can serve, and low enough that arrivals stay apart in
	// nanoseconds.
	MaxRate = 1e6
)

// Spec describes the load of one case: which keys, how many clients, how
// they pace themselves and how long the run lasts. It is always bounded:
// Run stops at Duration, at MaxOps operations or when its context ends,
// whichever comes first.
type Spec struct {
	// Workload chooses the keys: Hot, UniformKeys or Zipf.
	Workload Workload
	// Keys is the number of keys of UniformKeys and Zipf (1 to MaxKeys). Hot uses
	// one key; 0 is taken as 1, more is an error.
	Keys int
	// ZipfS is the skew of Zipf (> 1; DefaultZipfS when 0). Larger is
	// more skewed.
	ZipfS float64
	// Clients is the number of concurrent clients (≥ 1). Run needs one
	// Locker per client, as separate processes would have.
	Clients int
	// Rate selects the loop. 0 is a closed loop: each client acquires,
	// holds, releases and thinks, then starts again, so the backend's
	// speed sets the load. A positive Rate (grants asked per second) is an
	// open loop: arrivals come by a Poisson process at that rate whatever
	// the backend does, the clients serve them, and acquire latency is
	// measured from each arrival's intended time, so a backlog shows as
	// latency instead of being hidden (coordinated omission).
	Rate float64
	// Hold is how long a client keeps its critical section before it
	// writes and releases.
	Hold Dist
	// HoldLeft, when positive (at most 1), makes each holder hold a
	// uniform random fraction, up to HoldLeft, of the validity its lease
	// has left after its first access (ValidUntil − now) instead of Hold:
	// with 1 a holder may write at the last moment its lease vouches for,
	// so a lock whose ValidUntil claims more than it keeps is caught —
	// the key goes to another while the holder trusts its lease (a silent
	// stale write), or before the lock's own contract line (a lock bug).
	// A lease that reports no ValidUntil is held for Hold.
	HoldLeft float64
	// HoldFor, when positive, makes each holder hold exactly this long
	// after its first access, instead of Hold or HoldLeft, whatever its
	// lease says: with AutoExtend a hold of several TTLs that the lease's
	// watchdog keeps alive through a server fault (a leader cut off or
	// killed), where a lock that lets a session or lease die, or grants a
	// waiter while it is alive, shows. The holder checks its lease before
	// it writes, so the history says whether it was told.
	HoldFor time.Duration
	// AutoExtend acquires every lease with its own auto-extend watchdog
	// (locker.WithAutoExtend): the lease extends itself while its holder
	// holds, which with a Hold of several TTLs is where a late keep-alive
	// or a slow extension shows. Each extension is reported to the judge
	// (history.Extend), whose contract line it moves.
	AutoExtend bool
	// Think is how long a closed-loop client waits between releasing and
	// acquiring again (ignored by an open loop, whose arrivals pace it).
	Think Dist
	// TTL is the lease TTL asked of the backend (locker.DefaultTTL when 0).
	TTL time.Duration
	// AcquireTimeout bounds each Acquire (DefaultAcquireTimeout when 0); an
	// acquire that runs out counts as a timeout error.
	AcquireTimeout time.Duration
	// Duration bounds the run (DefaultDuration when 0).
	Duration time.Duration
	// MaxOps bounds the number of operations (acquire attempts) the run
	// starts; 0 means no bound but Duration.
	MaxOps int64
	// KeyPrefix starts every key name (DefaultKeyPrefix when empty), so
	// runs that share servers can keep apart.
	KeyPrefix string
	// Seed makes the key, hold, think and arrival draws reproducible; 0
	// picks a random seed.
	Seed uint64
	// TimelineStep is the width of one timeline bucket; 0 picks
	// Duration/100 between 10 ms and 1 s.
	TimelineStep time.Duration
	// AcquireOptions are passed to every Acquire after the TTL (a retry
	// strategy, auto-extension, ...). They stay in the process that set
	// them: a worker process gets none.
	AcquireOptions []locker.Option `json:"-"`
}

// Validate reports every bad field of s, each error wrapping ErrSpec and
// naming the value.
func (s Spec) Validate() error {
	_, err := s.Normalize()
	return err
}

// Normalize returns s with its defaults applied, or the joined errors of
// every bad field. Run calls it; callers use it to see the settings a run
// will have.
func (s Spec) Normalize() (Spec, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, specErrorf(format, args...)) }
	switch s.Workload {
	case Hot:
		if s.Keys == 0 {
			s.Keys = 1
		}
		if s.Keys != 1 {
			bad("keys %d: the hot workload uses one key (use uniform or zipf for more)", s.Keys)
		}
	case UniformKeys, Zipf:
		if s.Keys < 1 || s.Keys > MaxKeys {
			bad("keys %d: the %s workload needs 1 to %d", s.Keys, s.Workload, MaxKeys)
		}
	default:
		bad("workload %q: want %q, %q or %q", s.Workload, Hot, UniformKeys, Zipf)
	}
	if s.Workload == Zipf {
		if s.ZipfS == 0 {
			s.ZipfS = DefaultZipfS
		}
		if !(s.ZipfS > 1) || math.IsInf(s.ZipfS, 0) {
			bad("zipf s %v: must be a finite number above 1", s.ZipfS)
		}
	}
	if s.Clients < 1 {
		bad("clients %d: need at least 1", s.Clients)
	}
	if !(s.Rate >= 0) || s.Rate > MaxRate {
		bad("rate %v: must be 0 (closed loop) or a number of grants per second up to %g", s.Rate, float64(MaxRate))
	}
	if !(s.HoldLeft >= 0 && s.HoldLeft <= 1) {
		bad("hold left %v: must be a fraction of the validity left, 0 (off) to 1", s.HoldLeft)
	}
	switch {
	case s.HoldFor < 0:
		bad("hold for %v: must be positive (0 is off)", s.HoldFor)
	case s.HoldFor > 0 && s.HoldLeft > 0:
		bad("hold for %v and hold left %v: a holder holds either a duration or a fraction of its validity, not both", s.HoldFor, s.HoldLeft)
	}
	if s.TTL == 0 {
		s.TTL = locker.DefaultTTL
	}
	if s.TTL < 0 {
		bad("TTL %v: must be positive", s.TTL)
	}
	if s.AcquireTimeout == 0 {
		s.AcquireTimeout = DefaultAcquireTimeout
	}
	if s.AcquireTimeout < 0 {
		bad("acquire timeout %v: must be positive", s.AcquireTimeout)
	}
	if s.Duration == 0 {
		s.Duration = DefaultDuration
	}
	if s.Duration < 0 {
		bad("duration %v: must be positive", s.Duration)
	}
	if s.MaxOps < 0 {
		bad("max ops %d: must not be negative (0 means no bound but the duration)", s.MaxOps)
	}
	if s.TimelineStep == 0 {
		s.TimelineStep = min(max(s.Duration/100, 10*time.Millisecond), time.Second)
	}
	if s.TimelineStep < 0 {
		bad("timeline step %v: must be positive", s.TimelineStep)
	}
	if s.KeyPrefix == "" {
		s.KeyPrefix = DefaultKeyPrefix
	}
	if s.Seed == 0 {
		s.Seed = rand.Uint64() | 1
	}
	return s, errors.Join(errs...)
}

// Load names how s's holders hold beyond a drawn time (results.Case.Load):
// results.LoadValidity, results.LoadAutoExtend, both joined by "+", or
// "" for plain holds.
func (s Spec) Load() string {
	var l []string
	if s.HoldLeft > 0 {
		l = append(l, results.LoadValidity)
	}
	if s.HoldFor > 0 {
		l = append(l, results.LoadLongHold)
	}
	if s.AutoExtend {
		l = append(l, results.LoadAutoExtend)
	}
	return strings.Join(l, "+")
}

// KeyNames returns the keys of a normalized spec, by rank: under Zipf,
// rank 0 is the hottest.
func (s Spec) KeyNames() []string {
	if s.Workload == Hot {
		return []string{s.KeyPrefix + "hot"}
	}
	keys := make([]string, max(s.Keys, 0))
	for i := range keys {
		keys[i] = s.KeyPrefix + strconv.Itoa(i)
	}
	return keys
}

// chooser picks the key of each section for one client. It is not safe
// for concurrent use: every client has its own, with its own generator.
type chooser struct {
	keys []string
	r    *rand.Rand
	zipf *rand.Zipf
}

func newChooser(s Spec, keys []string, r *rand.Rand) *chooser {
	c := &chooser{keys: keys, r: r}
	if s.Workload == Zipf && len(keys) > 1 {
		c.zipf = rand.NewZipf(r, s.ZipfS, 1, uint64(len(keys)-1))
	}
	return c
}

// next returns the key of the next section and its rank.
func (c *chooser) next() (string, int) {
	var i int
	switch {
	case len(c.keys) == 1:
	case c.zipf != nil:
		i = int(c.zipf.Uint64())
	default:
		i = c.r.IntN(len(c.keys))
	}
	return c.keys[i], i
}
