package backends_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/backends"
	_ "github.com/lockbench/lockbench/backends/redlock"
)

// TestNoRegistration: importing the library registers nothing with
// lockbench's registry (backends/redlockbackend does), and it
// depends on nothing of lockbench's but locker, nor on an OpenTelemetry
// SDK or exporter.
func TestNoRegistration(t *testing.T) {
	if slices.Contains(backends.Names(), "redlock") {
		t.Errorf("importing backends/redlock registered %q: %v", "redlock", backends.Names())
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/lockbench/lockbench/backends/redlock").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for dep := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(dep, "github.com/lockbench/lockbench/") && dep != "github.com/lockbench/lockbench/locker" && dep != "github.com/lockbench/lockbench/backends/redlock" {
			t.Errorf("backends/redlock depends on %s", dep)
		}
		// The OpenTelemetry API, never its SDK: the application chooses one.
		if strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters") {
			t.Errorf("backends/redlock depends on %s", dep)
		}
	}
}
