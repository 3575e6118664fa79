package suites_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
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

// TestTableGolden: each predefined suite's rules, and the rules the flags
// add to them, expand into the cases of testdata/*.golden, in order, and
// leave out the same fault classes with the same reasons. The files were
// first written when the table replaced the old builder (bench.Suite and
// its overrides in cmd/lockbench/run.go), by a test that compared the two
// case by case (commits c8ce8be and c6b0f89): default 209 cases, quick
// 39, full 412, the same skips. The one designed difference: a spec a
// suite does not run (redlock?retries=3, postgres), narrowed to with
// --backend, takes the restart rule of its server kind, which the old
// builder's list, made before the narrowing, missed.
func TestTableGolden(t *testing.T) {
	narrow := []string{"redis", "redlock?quarantine=false", "redlock?retries=3", "etcd", "postgres"}
	faults := []string{"client-pause?x=2", "restart", "none", "clock-rate", "power-loss"}
	profiles := []string{"fast", "durable"}
	for _, tt := range []struct {
		name  string
		suite suites.Suite
	}{
		{"default", suites.Default()},
		{"quick", suites.Quick()},
		{"full", suites.Full()},
		{"quick-narrowed", suites.Quick().Narrow([]string{"redlock", "redsync"})},
		{"default-narrowed", suites.Default().Narrow(narrow)},
		{"default-faults", suites.Default().WithFaults(faults)},
		{"full-profiles", suites.Full().WithProfiles(profiles)},
		{"default-all-three", suites.Default().Narrow(narrow).WithFaults(faults).WithProfiles(profiles)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := tt.suite.Plan()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d cases, %d skips", len(plan.Cases), len(plan.Skipped))
			golden(t, tt.name, plan)
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
