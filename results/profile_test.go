package results

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestProfileRoundTrip(t *testing.T) {
	p := Profile{
		Intent: IntentCorrectness, Have: []string{"redis", "postgres"},
		Hold: HoldTime{P50: Duration(200 * time.Millisecond), P99: Duration(time.Second)},
		TTL:  Duration(5 * time.Second), Clients: 8, Keys: 100, KeyDist: KeyDistZipf,
		Token: TokenWrite, MaxPause: Duration(2 * time.Second), Unavailability: Duration(3 * time.Second),
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"ttl":"5s"`) {
		t.Errorf("TTL not written as a duration string: %s", b)
	}
	var q Profile
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("round trip: got %+v, want %+v", q, p)
	}
}

func TestDurationUnmarshal(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{`"200ms"`, 200 * time.Millisecond, ""},
		{`1000`, time.Microsecond, ""},
		{`"-1s"`, 0, "-1s: negative"},
		{`"fast"`, 0, `"fast"`},
		{`true`, 0, "true"},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one naming %s", tt.in, err, tt.wantErr)
		case tt.wantErr == "" && time.Duration(d) != tt.want:
			t.Errorf("%s: got %v, want %v", tt.in, time.Duration(d), tt.want)
		}
	}
}

func TestProfileIntents(t *testing.T) {
	for in, want := range map[string][]string{
		"":                {IntentCorrectness, IntentEfficiency},
		IntentBoth:        {IntentCorrectness, IntentEfficiency},
		IntentEfficiency:  {IntentEfficiency},
		IntentCorrectness: {IntentCorrectness},
	} {
		if got := (Profile{Intent: in}).Intents(); !reflect.DeepEqual(got, want) {
			t.Errorf("Intents(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzDurationUnmarshal(f *testing.F) {
	for _, s := range []string{`"200ms"`, `5`, `"-1s"`, `""`, `null`, `1e3`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil && d < 0 {
			t.Errorf("%q read as negative %v", in, d)
		}
	})
}
