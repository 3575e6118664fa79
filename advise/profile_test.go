package advise_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/lockbench/lockbench/backends/all"

	"github.com/lockbench/lockbench/advise"
)

// TestParse: a profile's YAML over the defaults, each field read, and
// what it does not give kept.
func TestParse(t *testing.T) {
	p, err := advise.Parse([]byte(`
intent: correctness
have: [redis, postgres]
hold: 10ms,200ms
ttl: 5s
clients: 8
keys: 1
key-dist: hot
token: none
max-pause: 2s
clock-step: 0s
unavailability: 10s
`), advise.Default())
	if err != nil {
		t.Fatal(err)
	}
	want := advise.Default()
	want.Intent, want.Have, want.HoldP50, want.HoldP99, want.TTL = "correctness", []string{"redis", "postgres"}, 10*time.Millisecond, 200*time.Millisecond, 5*time.Second
	want.Clients, want.Keys, want.KeyDist, want.Token, want.MaxPause, want.ClockStep, want.Unavailability = 8, 1, "hot", "none", 2*time.Second, 0, 10*time.Second
	if p.Intent != want.Intent || strings.Join(p.Have, ",") != "redis,postgres" || p.HoldP50 != want.HoldP50 || p.HoldP99 != want.HoldP99 ||
		p.TTL != want.TTL || p.Clients != want.Clients || p.Keys != 1 || p.KeyDist != "hot" || p.Token != "none" || p.MaxPause != want.MaxPause ||
		p.ClockStep != 0 || p.Unavailability != want.Unavailability {
		t.Fatalf("parsed %+v, want %+v", p, want)
	}
	if empty, err := advise.Parse(nil, advise.Default()); err != nil || empty.TTL != time.Second {
		t.Fatalf("an empty file: %+v, %v (want the defaults)", empty, err)
	}
	// A hold whose p99 is 20 times its p50: exponential, with that p99.
	if d := p.Hold(); d.String() != "exp:43.429448ms" {
		t.Errorf("hold 10ms,200ms as %v, want exp:43.429448ms (p99 200ms)", d)
	}
	// One a uniform can have: [50ms, 150ms] has median 100ms, p99 149ms.
	p.HoldP50, p.HoldP99 = 100*time.Millisecond, 149*time.Millisecond
	if d := p.Hold(); d.String() != "50ms-150ms" {
		t.Errorf("hold 100ms,149ms as %v, want 50ms-150ms", d)
	}
}

// TestBadProfile: every bad value is refused with an error that wraps
// ErrProfile and names it; several at once are all named.
func TestBadProfile(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"intent: speed", []string{`intent "speed"`}},
		{"have: [redis, mysql]", []string{`have "mysql"`}},
		{"backends: [redlock, dynamolock]", []string{`backend "dynamolock"`}},
		{"backends: [noop]", []string{`backend "noop": a control`}},
		{"hold: fast", []string{`hold "fast"`}},
		{"hold: 200ms,10ms", []string{"hold p99 10ms: below its p50 200ms"}},
		{"hold: 2s\nttl: 1s", []string{"hold p99 2s: not below the ttl 1s"}},
		{"ttl: -1s", []string{"ttl -1s"}},
		{"clients: 0", []string{"clients 0"}},
		{"clients: 100000", []string{"clients 100000"}},
		{"key-dist: hot\nkeys: 5", []string{"keys 5: key-dist hot"}},
		{"key-dist: pareto", []string{`key-dist "pareto"`}},
		{"key-dist: zipf\nkeys: 1", []string{"keys 1: key-dist zipf"}},
		{"token: maybe", []string{`token "maybe"`}},
		{"max-pause: -2s", []string{"max-pause -2s"}},
		{"clock-step: 2h", []string{"clock-step 2h0m0s"}},
		{"unavailability: soon", []string{`unavailability "soon"`}},
		{"colour: blue", []string{"colour"}},
		{"intent: [a", []string{"bad profile"}},
		{"intent: speed\ntoken: maybe\nclients: -1", []string{`intent "speed"`, `token "maybe"`, "clients -1"}},
	} {
		_, err := advise.Parse([]byte(tc.yaml), advise.Default())
		if !errors.Is(err, advise.ErrProfile) {
			t.Errorf("%q: error %v, want one wrapping ErrProfile", tc.yaml, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not name %q", tc.yaml, err, w)
			}
		}
	}
	// Auto-extended leases may be held past their TTL.
	if _, err := advise.Parse([]byte("hold: 3s\nttl: 1s\nauto-extend: true"), advise.Default()); err != nil {
		t.Errorf("an auto-extended lease held 3 TTLs refused: %v", err)
	}
}

// FuzzParse: no input makes Parse panic; a refusal wraps ErrProfile; a
// profile it accepts validates and plans.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"", "intent: both", "hold: 1ms,5ms\nttl: 1s", "have: [redis]\nclients: 3", "keys: 10\nkey-dist: zipf",
		"auto-extend: true\nhold: 5s", "token: read-write\nmax-pause: 0s\nclock-step: 0s", "backends: [redis, etcd]", "intent: [", "{}"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := advise.Parse(data, advise.Default())
		if err != nil {
			if !errors.Is(err, advise.ErrProfile) {
				t.Fatalf("%q: error %v does not wrap ErrProfile", data, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%q: accepted, then invalid: %v", data, err)
		}
		if _, err := advise.New(p, time.Minute); err != nil && !errors.Is(err, advise.ErrProfile) {
			t.Logf("%q: plan: %v", data, err)
		}
	})
}
