// Package advise turns a service's profile into a plan of cases (which
// candidates, which fault classes and why, how many tested injections
// and independent trials each comparison needs, how long it takes) and
// runs that plan in rounds, each spending what is left of the budget on
// the comparisons that could still change the answer.
package advise

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// ErrProfile is wrapped by every error about a profile's value.
var ErrProfile = errors.New("bad profile")

// The intents a profile can name.
const (
	IntentEfficiency  = results.IntentEfficiency
	IntentCorrectness = results.IntentCorrectness
	IntentBoth        = results.IntentBoth
)

// The tokens a profile's resource can check (Profile.Token).
const (
	TokenNone      = results.TokenNone
	TokenWrite     = results.TokenWrite
	TokenReadWrite = results.TokenReadWrite
)

// Kinds are the server kinds a team can say it runs (Profile.Have): the
// kinds lockbench starts.
func Kinds() []string {
	var out []string
	for _, k := range kinds.Names() {
		out = append(out, string(k))
	}
	return out
}

// Profile is what a service asks of its lock: what the answer is for
// (Intent), what the team already runs, and the load and faults the
// lock would see. Zero fields take Default's values.
type Profile struct {
	// Intent is IntentEfficiency, IntentCorrectness or IntentBoth.
	Intent string `yaml:"intent"`
	// Have are the server kinds the team runs (Kinds): candidates on
	// them need no new infrastructure; the others are "you would add".
	Have []string `yaml:"have"`
	// Backends are the candidate specs (every listed backend when empty).
	Backends []string `yaml:"backends"`
	// HoldP50 and HoldP99 are the critical section's median and 99th
	// percentile (equal for a fixed hold).
	HoldP50 time.Duration `yaml:"-"`
	HoldP99 time.Duration `yaml:"-"`
	// TTL is the lease TTL the service asks for; with AutoExtend the
	// lease extends itself while its holder holds.
	TTL        time.Duration `yaml:"-"`
	AutoExtend bool          `yaml:"auto-extend"`
	// Clients are the client processes that contend.
	Clients int `yaml:"clients"`
	// Keys and KeyDist are how sections spread over keys: one hot key,
	// or Keys keys uniform or zipf.
	Keys    int    `yaml:"keys"`
	KeyDist string `yaml:"key-dist"`
	// Token is what the resource can do with a fencing token: TokenNone,
	// TokenWrite (reject a stale write) or TokenReadWrite (and a stale
	// read).
	Token string `yaml:"token"`
	// MaxPause is the longest stall (GC, VM) a holder sees; 0 for none.
	MaxPause time.Duration `yaml:"-"`
	// ClockStep is the largest step of the servers' wall clock; 0 means
	// it only slews.
	ClockStep time.Duration `yaml:"-"`
	// Unavailability is how long the service can go without grants
	// after a fault.
	Unavailability time.Duration `yaml:"-"`
}

// Default is the profile of make bench: both intents, every backend, the
// default suite's load (1 ms holds, 1 s TTL, 16 clients on 100 uniform
// keys), holders that may stall 1.5 s, a clock that may step, 5 s of
// unavailability.
func Default() Profile {
	return Profile{
		Intent: IntentBoth, Have: Kinds(), HoldP50: time.Millisecond, HoldP99: time.Millisecond, TTL: time.Second,
		Clients: 16, Keys: 100, KeyDist: string(workloads.UniformKeys), Token: TokenWrite,
		MaxPause: 1500 * time.Millisecond, ClockStep: 500 * time.Millisecond, Unavailability: 5 * time.Second,
	}
}

// profileFile is a profile as YAML writes it: durations as Go writes
// them ("200ms", "5s"), hold as one duration or "p50,p99".
type profileFile struct {
	Intent         string   `yaml:"intent"`
	Have           []string `yaml:"have"`
	Backends       []string `yaml:"backends"`
	Hold           string   `yaml:"hold"`
	TTL            string   `yaml:"ttl"`
	AutoExtend     *bool    `yaml:"auto-extend"`
	Clients        *int     `yaml:"clients"`
	Keys           *int     `yaml:"keys"`
	KeyDist        string   `yaml:"key-dist"`
	Token          string   `yaml:"token"`
	MaxPause       string   `yaml:"max-pause"`
	ClockStep      string   `yaml:"clock-step"`
	Unavailability string   `yaml:"unavailability"`
}

// Parse reads a profile from YAML over base (the fields the file does
// not give keep base's) and validates it. Every error wraps ErrProfile
// and names the field and its bad value; unknown fields are errors.
func Parse(data []byte, base Profile) (Profile, error) {
	var pf profileFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&pf); err != nil && !errors.Is(err, io.EOF) {
		return base, fmt.Errorf("%w: %v", ErrProfile, err)
	}
	p := base
	var errs []error
	str := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	dur := func(field string, dst *time.Duration, v string) {
		if v == "" {
			return
		}
		d, err := parseDuration(field, v)
		if err != nil {
			errs = append(errs, err)
			return
		}
		*dst = d
	}
	str(&p.Intent, pf.Intent)
	if pf.Have != nil {
		p.Have = pf.Have
	}
	if pf.Backends != nil {
		p.Backends = pf.Backends
	}
	if pf.Hold != "" {
		if err := p.SetHold(pf.Hold); err != nil {
			errs = append(errs, err)
		}
	}
	dur("ttl", &p.TTL, pf.TTL)
	if pf.AutoExtend != nil {
		p.AutoExtend = *pf.AutoExtend
	}
	if pf.Clients != nil {
		p.Clients = *pf.Clients
	}
	if pf.Keys != nil {
		p.Keys = *pf.Keys
	}
	str(&p.KeyDist, pf.KeyDist)
	str(&p.Token, pf.Token)
	dur("max-pause", &p.MaxPause, pf.MaxPause)
	dur("clock-step", &p.ClockStep, pf.ClockStep)
	dur("unavailability", &p.Unavailability, pf.Unavailability)
	if err := errors.Join(errs...); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// parseDuration parses a duration of field, naming both when it cannot.
func parseDuration(field, v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q: want a duration such as 200ms or 5s", ErrProfile, field, v)
	}
	return d, nil
}

// SetHold sets the hold from "D" (fixed) or "P50,P99".
func (p *Profile) SetHold(v string) error {
	a, b, two := strings.Cut(v, ",")
	p50, err := parseDuration("hold", a)
	if err != nil {
		return err
	}
	p99 := p50
	if two {
		if p99, err = parseDuration("hold p99", b); err != nil {
			return err
		}
	}
	p.HoldP50, p.HoldP99 = p50, p99
	return nil
}

// maxClients bounds Profile.Clients: each is a worker process under a
// fault, on the machine the plan runs on.
const maxClients = 256

// Validate returns every bad field of p, each error wrapping ErrProfile
// and naming the value, joined.
func (p Profile) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrProfile}, args...)...))
	}
	switch p.Intent {
	case IntentEfficiency, IntentCorrectness, IntentBoth:
	default:
		bad("intent %q: want %s, %s or %s", p.Intent, IntentEfficiency, IntentCorrectness, IntentBoth)
	}
	known := Kinds()
	for _, h := range p.Have {
		if !slices.Contains(known, h) {
			bad("have %q: want some of %s", h, strings.Join(known, ", "))
		}
	}
	for _, spec := range p.Backends {
		b, err := bench.ParseBackend(spec)
		switch {
		case err != nil:
			bad("backend %q: %v", spec, err)
		case b.Descriptor.Control:
			bad("backend %q: a control that excludes nobody, not a lock to advise", spec)
		}
	}
	switch {
	case p.HoldP50 <= 0:
		bad("hold %v: must be positive", p.HoldP50)
	case p.HoldP99 < p.HoldP50:
		bad("hold p99 %v: below its p50 %v", p.HoldP99, p.HoldP50)
	case p.HoldP99 > time.Hour:
		bad("hold p99 %v: more than an hour", p.HoldP99)
	}
	switch {
	case p.TTL <= 0:
		bad("ttl %v: must be positive", p.TTL)
	case p.TTL > time.Hour:
		bad("ttl %v: more than an hour", p.TTL)
	case !p.AutoExtend && p.HoldP99 >= p.TTL && p.HoldP50 > 0:
		bad("hold p99 %v: not below the ttl %v, so holders outlive their leases: raise the ttl or set auto-extend", p.HoldP99, p.TTL)
	}
	if p.Clients < 1 || p.Clients > maxClients {
		bad("clients %d: want 1 to %d", p.Clients, maxClients)
	}
	switch workloads.Workload(p.KeyDist) {
	case workloads.Hot:
		if p.Keys != 1 && p.Keys != 0 {
			bad("keys %d: key-dist hot uses one key (give uniform or zipf for more)", p.Keys)
		}
	case workloads.UniformKeys, workloads.Zipf:
		if p.Keys < 2 || p.Keys > workloads.MaxKeys {
			bad("keys %d: key-dist %s needs 2 to %d", p.Keys, p.KeyDist, workloads.MaxKeys)
		}
	default:
		bad("key-dist %q: want hot, uniform or zipf", p.KeyDist)
	}
	switch p.Token {
	case TokenNone, TokenWrite, TokenReadWrite:
	default:
		bad("token %q: want %s, %s or %s", p.Token, TokenNone, TokenWrite, TokenReadWrite)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"max-pause", p.MaxPause}, {"clock-step", p.ClockStep}, {"unavailability", p.Unavailability}} {
		if d.v < 0 || d.v > time.Hour {
			bad("%s %v: want 0 to 1h", d.name, d.v)
		}
	}
	return errors.Join(errs...)
}

// Hold is the profile's hold as a distribution: fixed at the p50 when
// the p99 equals it; else uniform with that median and 99th percentile
// where one exists (p99 at most about twice the p50), and past that
// exponential with the p99 (its median is then 15% of the p99: the
// tail, which is what outlives a lease, is kept over the median).
func (p Profile) Hold() workloads.Dist {
	if p.HoldP99 <= p.HoldP50 {
		d, _ := workloads.Constant(p.HoldP50)
		return d
	}
	// Uniform on [lo, hi]: p50 = (lo+hi)/2, p99 = lo + 0.99(hi−lo).
	width := time.Duration(float64(p.HoldP99-p.HoldP50) / 0.49)
	if lo := p.HoldP50 - width/2; lo >= 0 {
		d, _ := workloads.Uniform(lo, lo+width)
		return d
	}
	d, _ := workloads.Exponential(time.Duration(float64(p.HoldP99) / math.Log(100)))
	return d
}

// Workload is the profile's key choice.
func (p Profile) Workload() workloads.Workload { return workloads.Workload(p.KeyDist) }

// intends reports whether p asks the question intent.
func (p Profile) intends(intent string) bool { return p.Intent == intent || p.Intent == IntentBoth }

// Results is p as results.json records it and the decision reads it,
// with candidates as its backends (none for make bench's profile: every
// backend the run measured).
func (p Profile) Results(candidates []Candidate) results.Profile {
	rp := results.Profile{
		Intent: p.Intent, Have: slices.Clone(p.Have), Hold: results.HoldTime{P50: results.Duration(p.HoldP50), P99: results.Duration(p.HoldP99)},
		TTL: results.Duration(p.TTL), AutoExtend: p.AutoExtend, Clients: p.Clients, Keys: max(p.Keys, 1), KeyDist: p.KeyDist, Token: p.Token,
		MaxPause: results.Duration(p.MaxPause), ClockStep: results.Duration(p.ClockStep), Unavailability: results.Duration(p.Unavailability),
	}
	if !p.isDefault() {
		for _, c := range candidates {
			rp.Backends = append(rp.Backends, c.Spec)
		}
	}
	return rp
}
