// Package backendstest holds what the tests of the backends share beyond
// the conformance suite (locker/locktest): opening a backend through the
// registry, as lockbench does, and checking that it refuses bad
// configurations with errors that name the bad value.
package backendstest

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
)

// Open opens the registered backend name with cfg, failing tb when it
// cannot. The caller closes it.
func Open(tb testing.TB, name string, cfg backends.Config) locker.Locker {
	tb.Helper()
	l, err := backends.Open(name, cfg)
	if err != nil {
		tb.Fatalf("open %s: %v", name, err)
	}
	return l
}

// OpenClosed is Open with a Close when tb ends; an error from Close fails
// tb.
func OpenClosed(tb testing.TB, name string, cfg backends.Config) locker.Locker {
	tb.Helper()
	l := Open(tb, name, cfg)
	tb.Cleanup(func() {
		if err := l.Close(); err != nil {
			tb.Errorf("close %s: %v", name, err)
		}
	})
	return l
}

// BadConfig is a configuration a backend must refuse.
type BadConfig struct {
	// Name labels the subtest.
	Name   string
	Config backends.Config
	// Want is what the error must mention: the bad value, or the rule it
	// breaks.
	Want string
}

// RefusesBadConfigs checks, in a subtest each, that opening the backend
// name with every configuration fails with an error that wraps
// locker.ErrInvalid and mentions Want.
func RefusesBadConfigs(t *testing.T, name string, bad []BadConfig) {
	t.Helper()
	for _, tc := range bad {
		t.Run(tc.Name, func(t *testing.T) {
			l, err := backends.Open(name, tc.Config)
			if err == nil {
				l.Close()
				t.Fatalf("Open(%s, %+v) succeeded", name, tc.Config)
			}
			if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("Open(%s, %+v) = %v, want ErrInvalid mentioning %q", name, tc.Config, err, tc.Want)
			}
		})
	}
}
