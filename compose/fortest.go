package compose

import (
	"flag"
)

// TB is the part of testing.TB that ForTest uses, so that compose itself
// does not import testing.
//
// Deprecated: use composetest.ForTest, which takes a testing.TB.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Failed() bool
	Skip(args ...any)
	Fatal(args ...any)
	Error(args ...any)
	Logf(format string, args ...any)
}

// ForTest returns an Env in a temporary directory that is closed when tb
// ends, and skips tb under -short.
//
// Deprecated: use composetest.ForTest, which also bounds how long the test
// may run. ForTest stays only until the tests written against it on other
// branches (backends/redlock's) have moved; then it goes.
func ForTest(tb TB) *Env {
	tb.Helper()
	if f := flag.Lookup("test.short"); f != nil && f.Value.String() == "true" {
		tb.Skip("starts servers: skipped under -short (make unit); make test runs it")
	}
	e, err := New(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, n := range e.Nodes() {
				tb.Logf("--- %s log (tail) ---\n%s", n.Name, n.LogTail(2048))
			}
		}
		if err := e.Close(); err != nil {
			tb.Error(err)
		}
	})
	return e
}
