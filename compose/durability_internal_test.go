package compose

import (
	"strings"
	"testing"
)

// TestDurabilityResolution checks how a kind's Durability and its older
// bool combine: the profile when set, the bool's meaning otherwise, and an
// error naming both when they disagree or the profile is unknown.
func TestDurabilityResolution(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d       Durability
		legacy  bool
		want    Durability
		wantErr string
	}{
		{name: "neither: the kind's default", want: DurabilityFast},
		{name: "the bool alone", legacy: true, want: DurabilityDurable},
		{name: "the profile alone", d: DurabilityPeriodic, want: DurabilityPeriodic},
		{name: "both agree", d: DurabilityDurable, legacy: true, want: DurabilityDurable},
		{name: "both disagree", d: DurabilityPeriodic, legacy: true, wantErr: "Durability periodic contradicts AOF"},
		{name: "unknown profile", d: "sometimes", wantErr: `durability "sometimes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := durability("Redis", tc.d, tc.legacy, "AOF", DurabilityDurable, DurabilityFast)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("durability = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("durability = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, d := range Durabilities() {
		if got, err := ParseDurability(string(d)); err != nil || got != d {
			t.Errorf("ParseDurability(%q) = %q, %v", d, got, err)
		}
	}
}
