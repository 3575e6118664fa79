package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTestingOnlyInTestHelpers: the testing package is imported by test
// files and by the packages made for tests (whose names end in "test":
// locktest, backendstest, composetest), never by the code lockbench and
// its libraries are built from; and the binaries do not link it (it adds
// its flags to every program that does).
func TestTestingOnlyInTestHelpers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/lockbench/lockbench/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.HasSuffix(pkg, "test") {
			continue
		}
		for imp := range strings.FieldsSeq(imports) {
			if imp == "testing" || strings.HasPrefix(imp, "testing/") {
				t.Errorf("%s imports %s outside its test files: move what needs it to a package for tests (such as compose/composetest)", pkg, imp)
			}
		}
	}
	out, err = exec.Command("go", "list", "-deps", "github.com/lockbench/lockbench/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for dep := range strings.Lines(string(out)) {
		if dep = strings.TrimSpace(dep); dep == "testing" || strings.HasSuffix(dep, "test") && strings.HasPrefix(dep, "github.com/lockbench/") {
			t.Errorf("the binaries link %s", dep)
		}
	}
}
