package workloads

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/locker"
)

func TestParseDist(t *testing.T) {
	for _, tc := range []struct {
		in       string
		str      string
		min, max time.Duration
		mean     time.Duration
	}{
		{"2ms", "2ms", 2 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond},
		{"0", "0s", 0, 0, 0},
		{" 1ms-5ms ", "1ms-5ms", time.Millisecond, 5 * time.Millisecond, 3 * time.Millisecond},
		{"3ms-3ms", "3ms-3ms", 3 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond},
		{"exp:2ms", "exp:2ms", 0, 100 * time.Millisecond, 2 * time.Millisecond},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, err := ParseDist(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if d.String() != tc.str || d.Mean() != tc.mean || d.Max() != tc.max {
				t.Fatalf("ParseDist(%q) = %v (mean %v, max %v), want %s (mean %v, max %v)", tc.in, d, d.Mean(), d.Max(), tc.str, tc.mean, tc.max)
			}
			again, err := ParseDist(d.String())
			if err != nil || again != d {
				t.Fatalf("String does not round-trip: %q → %v, %v", d.String(), again, err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			var sum time.Duration
			const n = 20000
			for range n {
				v := d.Sample(r)
				if v < tc.min || v > tc.max {
					t.Fatalf("sample %v outside [%v, %v]", v, tc.min, tc.max)
				}
				sum += v
			}
			if got := sum / n; math.Abs(float64(got-tc.mean)) > 0.05*float64(tc.mean) {
				t.Fatalf("mean of %d samples %v, want about %v", n, got, tc.mean)
			}
		})
	}
}

func TestParseDistNamesBadInput(t *testing.T) {
	for _, in := range []string{"", "fast", "2", "-1ms", "5ms-1ms", "1ms-", "-", "1ms-x", "exp:", "exp:0", "exp:-2ms", "exp:soon"} {
		t.Run(in, func(t *testing.T) {
			d, err := ParseDist(in)
			if err == nil {
				t.Fatalf("ParseDist(%q) = %v, want an error", in, d)
			}
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), `"`+in+`"`) {
				t.Fatalf("ParseDist(%q) error %q does not wrap ErrSpec and name the input", in, err)
			}
		})
	}
	var d Dist
	if err := d.UnmarshalText([]byte("exp:1ms")); err != nil || d.String() != "exp:1ms" {
		t.Fatalf("UnmarshalText = %v, %v", d, err)
	}
	if err := d.UnmarshalText([]byte("1ms-0s")); err == nil {
		t.Fatal("UnmarshalText accepted an inverted range")
	}
}

func TestSpecValidateNamesEveryBadValue(t *testing.T) {
	good := Spec{Workload: UniformKeys, Keys: 10, Clients: 2}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Spec)
		want   string
	}{
		{"unknown workload", func(s *Spec) { s.Workload = "random" }, `"random"`},
		{"no workload", func(s *Spec) { s.Workload = "" }, `workload ""`},
		{"no keys", func(s *Spec) { s.Keys = 0 }, "keys 0"},
		{"negative keys", func(s *Spec) { s.Keys = -3 }, "keys -3"},
		{"too many keys", func(s *Spec) { s.Keys = 2_000_000_000 }, "keys 2000000000"},
		{"hot with many keys", func(s *Spec) { s.Workload = Hot; s.Keys = 5 }, "keys 5"},
		{"zipf s at 1", func(s *Spec) { s.Workload = Zipf; s.ZipfS = 1 }, "zipf s 1"},
		{"zipf s NaN", func(s *Spec) { s.Workload = Zipf; s.ZipfS = math.NaN() }, "zipf s NaN"},
		{"no clients", func(s *Spec) { s.Clients = 0 }, "clients 0"},
		{"negative rate", func(s *Spec) { s.Rate = -5 }, "rate -5"},
		{"NaN rate", func(s *Spec) { s.Rate = math.NaN() }, "rate NaN"},
		{"huge rate", func(s *Spec) { s.Rate = 1e12 }, "rate 1e+12"},
		{"negative TTL", func(s *Spec) { s.TTL = -time.Second }, "TTL -1s"},
		{"negative timeout", func(s *Spec) { s.AcquireTimeout = -time.Second }, "acquire timeout -1s"},
		{"negative duration", func(s *Spec) { s.Duration = -time.Second }, "duration -1s"},
		{"negative max ops", func(s *Spec) { s.MaxOps = -1 }, "max ops -1"},
		{"negative step", func(s *Spec) { s.TimelineStep = -time.Second }, "timeline step -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.mutate(&s)
			err := s.Validate()
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want ErrSpec naming %s", err, tc.want)
			}
		})
	}
	// Every bad field is reported, not just the first.
	err := Spec{Workload: UniformKeys, Keys: -1, Clients: -2, Duration: -time.Second}.Validate()
	for _, want := range []string{"keys -1", "clients -2", "duration -1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v: does not name %s", err, want)
		}
	}
}

func TestSpecDefaults(t *testing.T) {
	s, err := Spec{Workload: Hot, Clients: 1}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if s.Keys != 1 || s.TTL != locker.DefaultTTL || s.Duration != DefaultDuration ||
		s.AcquireTimeout != DefaultAcquireTimeout || s.TimelineStep != 100*time.Millisecond ||
		s.KeyPrefix != DefaultKeyPrefix || s.Seed == 0 {
		t.Fatalf("defaults not applied: %+v", s)
	}
	if keys := s.KeyNames(); len(keys) != 1 {
		t.Fatalf("hot keys %q", keys)
	}
	z, err := Spec{Workload: Zipf, Keys: 3, Clients: 1, Duration: time.Second}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if z.ZipfS != DefaultZipfS || z.TimelineStep != 10*time.Millisecond {
		t.Fatalf("zipf defaults not applied: %+v", z)
	}
	if keys := z.KeyNames(); len(keys) != 3 || keys[0] == keys[1] {
		t.Fatalf("zipf keys %q", keys)
	}
}
