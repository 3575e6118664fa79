package bench_test

import (
	"errors"
	"testing"

	"github.com/lockbench/lockbench/bench"
)

// FuzzParseBackend: a backend spec (name?k=v) comes from the command
// line. ParseBackend accepts a registered name with its params or
// returns an error naming the spec, and never panics; a spec it accepts
// parses again to the same backend and params.
func FuzzParseBackend(f *testing.F) {
	for _, seed := range []string{
		"noop", "redlock", "redlock?quarantine=false&fencing=true", "redis", "etcd?pool=2",
		"sentinel", "zookeeper", "postgres?mode=lease", "redsync", "rueidislock",
		"redlock?%zz", "redlock?a=1&a=2", "nope", "", "?", "redlock?=x", "redlock?;",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		b, err := bench.ParseBackend(spec)
		if err != nil {
			if !errors.Is(err, bench.ErrConfig) {
				t.Fatalf("ParseBackend(%q) = %v: does not wrap ErrConfig", spec, err)
			}
			return
		}
		again, err := bench.ParseBackend(b.Spec)
		if err != nil || again.Name != b.Name || len(again.Params) != len(b.Params) {
			t.Fatalf("ParseBackend(%q) = %s %v, then its own spec: %s %v, %v", spec, b.Name, b.Params, again.Name, again.Params, err)
		}
		for k, v := range b.Params {
			if again.Params[k] != v {
				t.Fatalf("ParseBackend(%q) twice: param %s = %q, then %q", spec, k, v, again.Params[k])
			}
		}
	})
}
