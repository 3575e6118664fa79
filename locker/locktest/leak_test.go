package locktest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/locker/locktest"
)

// recorder is a testing.TB that records what Leaked reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestLeaked shows that the leak check sees a goroutine left behind (and
// names its function), and passes once it has ended.
func TestLeaked(t *testing.T) {
	before := locktest.Running()
	stop := make(chan struct{})
	done := make(chan struct{})
	go leftBehind(stop, done)
	r := &recorder{TB: t}
	before.Leaked(r)
	close(stop)
	<-done
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "leftBehind") {
		t.Fatalf("Leaked with a goroutine left behind reported %q, want one error naming leftBehind", r.errors)
	}
	r.errors = nil
	before.Leaked(r)
	if len(r.errors) != 0 {
		t.Fatalf("Leaked after the goroutine ended reported %q", r.errors)
	}
	go leftBehind(stop, make(chan struct{})) // stop is closed: it ends at once or is ignored
	before.Leaked(r, "leftBehind")
	if len(r.errors) != 0 {
		t.Fatalf("Leaked ignoring leftBehind reported %q", r.errors)
	}
}

func leftBehind(stop, done chan struct{}) {
	<-stop
	close(done)
}
