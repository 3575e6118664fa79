package suites_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestArrowsPointDown: the case table sits above the runner, and the
// worker protocol below it: worker imports neither bench nor suites, and
// bench does not import suites.
func TestArrowsPointDown(t *testing.T) {
	const mod = "github.com/lockbench/lockbench/"
	for _, tc := range []struct {
		pkg string
		not []string
	}{
		{"worker", []string{"bench", "suites"}},
		{"bench", []string{"suites"}},
	} {
		out, err := exec.Command("go", "list", "-deps", mod+tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for _, n := range tc.not {
			if slices.Contains(deps, mod+n) {
				t.Errorf("%s imports %s: the arrow points up", tc.pkg, n)
			}
		}
	}
}
