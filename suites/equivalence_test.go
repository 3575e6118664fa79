package suites_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/lockbench/lockbench/backends/all"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/suites"
)

// key names a case by everything that sets it apart.
func key(c bench.Case) string {
	return fmt.Sprintf("%s inj=%d spec=%+v", c, c.Injections, c.Spec)
}

// TestTableMatchesTheOldBuilder: each predefined suite's rules expand
// into the very cases, in the same order, that bench.Suite built, and
// skip the same fault classes on the same backends.
func TestTableMatchesTheOldBuilder(t *testing.T) {
	for _, tt := range []struct {
		old bench.Suite
		new suites.Suite
	}{
		{bench.Default(), suites.Default()},
		{bench.Quick(), suites.Quick()},
		{bench.Full(), suites.Full()},
	} {
		t.Run(tt.old.Name, func(t *testing.T) {
			want, err := tt.old.Cases()
			if err != nil {
				t.Fatal(err)
			}
			plan, err := tt.new.Plan()
			if err != nil {
				t.Fatal(err)
			}
			for i := range max(len(want), len(plan.Cases)) {
				var w, g string
				if i < len(want) {
					w = key(want[i])
				}
				if i < len(plan.Cases) {
					g = key(plan.Cases[i])
				}
				if w != g {
					t.Fatalf("case %d of %d (old %d):\n got %s\nwant %s", i, len(plan.Cases), len(want), g, w)
				}
			}
			old := map[[2]string]string{}
			for _, s := range tt.old.Skipped() {
				old[[2]string{s.Backend, s.FaultClass}] = s.Reason
			}
			for _, s := range plan.Skipped {
				k := [2]string{s.Backend, s.FaultClass}
				r, ok := old[k]
				if !ok {
					t.Errorf("%v skipped (%s), not by the old builder", k, s.Reason)
				}
				delete(old, k)
				// A reason of the backend's or the nemesis's is the same
				// sentence; one of the suite's rules names the suite.
				if r != s.Reason && !(strings.Contains(r, "suite") && strings.Contains(s.Reason, "suite")) {
					t.Errorf("%v: reason %q, was %q", k, s.Reason, r)
				}
			}
			for k, r := range old {
				t.Errorf("%v not skipped, but by the old builder (%s)", k, r)
			}
			golden(t, tt.old.Name, plan)
			t.Logf("%d cases, %d skips", len(plan.Cases), len(plan.Skipped))
		})
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the table")

// golden compares the plan's cases and skips with testdata/NAME.golden,
// the cases the suite has run since the table replaced the old builder:
// a change to the table shows there, case by case.
func golden(t *testing.T, name string, plan suites.Plan) {
	t.Helper()
	// Which faults fit a backend's servers depends on what they can be
	// started with here; the golden files hold the cases of a machine
	// that has it all (this project's).
	if compose.PeerNetworkAvailable() != nil || compose.LazyFSAvailable() != nil || compose.FakeClockAvailable() != nil {
		t.Skip("no network namespaces, lazy filesystem or clock preload here: the golden files are those of a machine with all three")
	}
	var b strings.Builder
	for _, c := range plan.Cases {
		fmt.Fprintln(&b, key(c))
	}
	for _, s := range plan.Skipped {
		fmt.Fprintf(&b, "skip %s %s: %s\n", s.Backend, s.FaultClass, s.Reason)
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(b.String(), "\n")
	for i, w := range strings.Split(string(want), "\n") {
		if i >= len(got) || got[i] != w {
			g := ""
			if i < len(got) {
				g = got[i]
			}
			t.Fatalf("%s line %d:\n got %s\nwant %s\n(go test ./suites -run TestTableMatchesTheOldBuilder -update rewrites it)", path, i+1, g, w)
		}
	}
	if len(got) != len(strings.Split(string(want), "\n")) {
		t.Fatalf("%s: %d lines, want %d", path, len(got), len(strings.Split(string(want), "\n")))
	}
}

// TestOverridesMatchTheOldFlags: the rules --backend, --fault and
// --durability become give the cases run.go's overrides of the old
// builder's fields gave.
func TestOverridesMatchTheOldFlags(t *testing.T) {
	narrow := []string{"redis", "redlock?quarantine=false", "redlock?retries=3", "etcd", "postgres"}
	faults := []string{"client-pause?x=2", "restart", "none", "clock-rate", "power-loss"}
	profiles := []string{"fast", "durable"}
	for _, tt := range []struct {
		name string
		old  func() bench.Suite
		new  func() suites.Suite
	}{
		{"quick narrowed", func() bench.Suite { s := bench.Quick(); s.Backends = []string{"redlock", "redsync"}; return s },
			func() suites.Suite { return suites.Quick().Narrow([]string{"redlock", "redsync"}) }},
		{"default narrowed", func() bench.Suite { s := bench.Default(); s.Backends = narrow; return s },
			func() suites.Suite { return suites.Default().Narrow(narrow) }},
		{"default faults", func() bench.Suite { s := bench.Default(); s.Faults = faults; return s },
			func() suites.Suite { return suites.Default().WithFaults(faults) }},
		{"full profiles", func() bench.Suite {
			s := bench.Full()
			s.Profiles = map[string][]string{}
			for _, f := range s.Faults {
				s.Profiles[strings.Split(f, "?")[0]] = profiles
			}
			return s
		}, func() suites.Suite { return suites.Full().WithProfiles(profiles) }},
		{"default all three", func() bench.Suite {
			s := bench.Default()
			s.Backends, s.Faults = narrow, faults
			s.Profiles = map[string][]string{}
			for _, f := range s.Faults {
				s.Profiles[strings.Split(f, "?")[0]] = profiles
			}
			return s
		}, func() suites.Suite { return suites.Default().Narrow(narrow).WithFaults(faults).WithProfiles(profiles) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, err := tt.old().Cases()
			if err != nil {
				t.Fatal(err)
			}
			plan, err := tt.new().Plan()
			if err != nil {
				t.Fatal(err)
			}
			// One difference, by design: the old builder listed the
			// backends of a majority's restart (Only) before --backend
			// replaced the suite's, so that a spec it did not know
			// (redlock?retries=3, postgres) skipped the restart the
			// table's rule gives every lock on Redis or PostgreSQL; Kinds
			// selects among the backends the suite runs.
			plan.Cases = slices.DeleteFunc(plan.Cases, func(c bench.Case) bool {
				return (c.Backend.Spec == "redlock?retries=3" || c.Backend.Spec == "postgres") && c.Fault.Class() == "restart"
			})
			for i := range max(len(want), len(plan.Cases)) {
				var w, g string
				if i < len(want) {
					w = key(want[i])
				}
				if i < len(plan.Cases) {
					g = key(plan.Cases[i])
				}
				if w != g {
					t.Fatalf("case %d of %d (old %d):\n got %s\nwant %s", i, len(plan.Cases), len(want), g, w)
				}
			}
			t.Logf("%d cases", len(plan.Cases))
		})
	}
}
