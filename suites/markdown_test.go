package suites_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/suites"
)

// TestDocsReadTheTable: docs/suites.md holds the case table as
// WriteMarkdown writes it, between its markers.
func TestDocsReadTheTable(t *testing.T) {
	const begin, end = "<!-- the table: go test ./suites -update rewrites it -->\n", "<!-- end of the table -->"
	path := filepath.Join("..", "docs", "suites.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok1 := strings.Cut(string(doc), begin)
	table, tail, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s: no markers %q and %q", path, begin, end)
	}
	var b strings.Builder
	if err := suites.WriteMarkdown(&b, suites.Table); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, []byte(head+begin+b.String()+end+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if table != b.String() {
		t.Errorf("%s does not hold the table as suites.Table says it (go test ./suites -run TestDocsReadTheTable -update):\n%s", path, b.String())
	}
}
