package nemesis_test

import (
	"errors"
	"net/url"
	"testing"

	"github.com/lockbench/lockbench/nemesis"
)

// FuzzParse: a fault spec comes from the command line or a profile
// (client-pause?x=3, clock-jump?by=0.5&nodes=minority). Parse accepts it
// or returns an error wrapping ErrFault, and never panics; a fault it
// accepts keeps its spec and parses again to the same scenario and
// params.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"none", "client-pause", "client-pause?x=3", "client-pause?x=0.5&point=hold",
		"clock-jump?by=0.5&nodes=minority", "server-pause", "restart", "power-loss",
		"partition", "latency", "leader-kill", "failover", "crash-minority", "mixed",
		"client-pause?x=-1", "client-pause?x=NaN", "client-pause?x=1e400", "clock-jump?by=",
		"client-pause?%zz", "nope", "?x=1", "", "client-pause?x=3&x=4",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		fault, err := nemesis.Parse(spec)
		if err != nil {
			if !errors.Is(err, nemesis.ErrFault) {
				t.Fatalf("Parse(%q) = %v: does not wrap ErrFault", spec, err)
			}
			return
		}
		if fault.Spec != spec {
			t.Fatalf("Parse(%q).Spec = %q", spec, fault.Spec)
		}
		again, err := nemesis.Parse(fault.Spec)
		if err != nil {
			t.Fatalf("Parse(%q) accepted it, then refused its own spec: %v", spec, err)
		}
		if again.Class() != fault.Class() || url.Values(again.Params).Encode() != url.Values(fault.Params).Encode() {
			t.Fatalf("Parse(%q) twice: %s %v, then %s %v", spec, fault.Class(), fault.Params, again.Class(), again.Params)
		}
	})
}
