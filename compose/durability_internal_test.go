package compose

import (
	"strings"
	"testing"
)

// TestDurabilityResolution checks how a kind's Durability resolves: the
// profile when set, the kind's default otherwise, and an error naming an
// unknown profile.
func TestDurabilityResolution(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d, def  Durability
		want    Durability
		wantErr string
	}{
		{name: "unset: the kind's default", def: DurabilityFast, want: DurabilityFast},
		{name: "unset: another kind's default", def: DurabilityDurable, want: DurabilityDurable},
		{name: "the profile", d: DurabilityPeriodic, def: DurabilityDurable, want: DurabilityPeriodic},
		{name: "unknown profile", d: "sometimes", def: DurabilityFast, wantErr: `durability "sometimes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := durability(tc.d, tc.def)
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
