// Package conventions_test holds the house rules a reviewer would check by
// hand, checked over every package of the module.
package conventions_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// The house's limits for non-test Go code: a file a reader takes in at
// once, a line a side-by-side diff shows whole.
const (
	maxFileLines = 500
	maxLineRunes = 140
)

// TestFilesAndLinesShort: no non-test Go file of the module is over
// maxFileLines lines, and none has a line over maxLineRunes characters
// but for URLs; vendored code (third_party) and generated files aside.
func TestFilesAndLinesShort(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "third_party" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			line := sc.Text()
			if n == 1 && strings.HasPrefix(line, "// Code generated") {
				return nil
			}
			if utf8.RuneCountInString(line) > maxLineRunes && !strings.Contains(line, "://") {
				t.Errorf("%s:%d: %d characters, over %d", path, n, utf8.RuneCountInString(line), maxLineRunes)
			}
		}
		if n > maxFileLines {
			t.Errorf("%s: %d lines, over %d: split it where its responsibilities part", path, n, maxFileLines)
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d non-test Go files: the walk missed the module", files)
	}
}
