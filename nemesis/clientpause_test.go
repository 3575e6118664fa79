package nemesis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/workloads"
)

func TestClientPauseParams(t *testing.T) {
	for _, good := range []string{"client-pause", "client-pause?at=acquire", "client-pause?at=before-read&x=3", "client-pause?at=after-read",
		"client-pause?at=after-write", "client-pause?at=extend&x=0.5", "client-pause?at=granted"} {
		if _, err := nemesis.Parse(good); err != nil {
			t.Errorf("Parse(%q) = %v", good, err)
		}
	}
	for _, bad := range []string{"client-pause?at=release", "client-pause?at=idle", "client-pause?at=extend&x=0"} {
		if _, err := nemesis.Parse(bad); !errors.Is(err, nemesis.ErrFault) {
			t.Errorf("Parse(%q) = %v, want ErrFault", bad, err)
		}
	}
}

// TestCheckSpec: a pause aimed inside an extension needs leases that
// extend themselves, held long enough for their watchdog to extend them;
// other faults take any load.
func TestCheckSpec(t *testing.T) {
	ms, _ := workloads.Constant(time.Millisecond)
	long, _ := workloads.Uniform(2*time.Second, 3*time.Second)
	for _, tc := range []struct {
		fault string
		spec  workloads.Spec
		ok    bool
	}{
		{"client-pause?at=extend", workloads.Spec{TTL: time.Second, Hold: long, AutoExtend: true}, true},
		{"client-pause?at=extend", workloads.Spec{TTL: time.Second, HoldLeft: 1, AutoExtend: true}, true},
		{"client-pause?at=extend", workloads.Spec{TTL: time.Second, Hold: long}, false},
		{"client-pause?at=extend", workloads.Spec{TTL: time.Second, Hold: ms, AutoExtend: true}, false},
		{"client-pause?at=acquire", workloads.Spec{TTL: time.Second, Hold: ms}, true},
		{"client-pause", workloads.Spec{TTL: time.Second, Hold: ms}, true},
		{"none", workloads.Spec{TTL: time.Second, Hold: ms}, true},
	} {
		f, err := nemesis.Parse(tc.fault)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.CheckSpec(tc.spec); (err == nil) != tc.ok || (err != nil && !errors.Is(err, nemesis.ErrFault)) {
			t.Errorf("%s under %+v: CheckSpec = %v, want ok %v", tc.fault, tc.spec, err, tc.ok)
		}
	}
}
