package locktest

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Goroutines is the set of goroutines running at one moment, the ones a
// later Leaked check does not count: the suite's own leak check, and the
// one a backend's tests can use, without a dependency beyond the
// standard library (the locker module requires nothing).
type Goroutines map[string]bool

// Running returns the goroutines running now.
func Running() Goroutines {
	g := Goroutines{}
	for _, s := range stacks() {
		g[goroutineID(s)] = true
	}
	return g
}

// Leaked fails t when, after up to five seconds of waiting for them to
// end, goroutines are running that were not in before, except the
// caller's, the test framework's and those whose stack contains one of
// ignore (function names such as "pkg.(*T).loop"). It lists their
// stacks.
func (before Goroutines) Leaked(t testing.TB, ignore ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	wait := time.Millisecond
	for {
		extra := before.extra(ignore)
		if len(extra) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutine(s) left behind:\n\n%s", len(extra), strings.Join(extra, "\n\n"))
			return
		}
		// A wait for goroutines to end, which nothing signals: poll.
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// extra returns the stacks of the goroutines running now that before
// does not hold and that are neither the caller's nor ignored.
func (before Goroutines) extra(ignore []string) []string {
	var out []string
	all := stacks()
	for i, s := range all {
		if i == 0 || before[goroutineID(s)] || background(s) {
			continue // all[0] is the caller's own goroutine
		}
		if containsAny(s, ignore) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// background reports whether stack s is one the runtime or the test
// framework runs on its own: another test waiting to run, signal
// handling, tracing.
func background(s string) bool {
	return containsAny(s, []string{
		"testing.(*T).Parallel", "testing.(*T).Run(", "testing.RunTests", "testing.(*F).Fuzz",
		"os/signal.signal_recv", "os/signal.loop", "runtime/trace.Start", "runtime.ensureSigM",
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// stacks returns the stack of every goroutine, the caller's first.
func stacks() []string {
	for n := 1 << 16; ; n *= 2 {
		buf := make([]byte, n)
		if m := runtime.Stack(buf, true); m < n {
			var out []string
			for _, s := range bytes.Split(buf[:m], []byte("\n\n")) {
				out = append(out, string(s))
			}
			return out
		}
	}
}

// goroutineID returns the "goroutine N" that starts stack s.
func goroutineID(s string) string {
	head, _, _ := strings.Cut(s, " [")
	return head
}
