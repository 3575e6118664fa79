package servertest

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// grace is how long a test that ran past its deadline, and whose servers
// were then killed, has to end before the test binary panics. (A variable
// for this package's tests.)
var grace = 10 * time.Second

// A watch is the deadline of one test that starts servers, which its
// subtests share.
type watch struct {
	tb    testing.TB
	start time.Time
	ended chan struct{} // closed when tb's cleanups have run

	mu       sync.Mutex
	deadline time.Duration // from start
	timer    *time.Timer
	done     bool        // tb ended in time
	closers  []io.Closer // closed at the deadline: the test's servers
}

// watches holds the watch of every test that started servers and has not
// ended, by the test's name.
var (
	watchesMu sync.Mutex
	watches   = map[string]*watch{}
)

// watchOf returns the watch of the test named name, or of its nearest
// ancestor that has one, or nil. The caller holds watchesMu.
func watchOf(name string) *watch {
	for {
		if w, ok := watches[name]; ok {
			return w
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

// arm gives tb until d from now to end. If tb, or a test it is a subtest
// of, has a deadline already, that one is moved later when it falls
// before: a subtest runs under its parent's deadline. The watch's cleanup
// is registered before any Env's, so it runs after them: closing the
// servers counts.
func arm(tb testing.TB, d time.Duration) {
	watchesMu.Lock()
	w := watchOf(tb.Name())
	if w == nil {
		w = &watch{tb: tb, start: time.Now(), deadline: d, ended: make(chan struct{})}
		watches[tb.Name()] = w
		watchesMu.Unlock()
		w.mu.Lock()
		w.timer = time.AfterFunc(d, w.expire)
		w.mu.Unlock()
		tb.Cleanup(w.stop)
		return
	}
	watchesMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if later := time.Since(w.start) + d; later > w.deadline && !w.done && w.timer.Stop() {
		w.deadline = later
		w.timer.Reset(d)
	}
}

// Watch adds c to what tb's deadline closes, with its servers in mind:
// an Env whose Close kills them, a simulated host. It does nothing when
// tb has no deadline (tb did not call StartsServers).
func Watch(tb testing.TB, c io.Closer) {
	watchesMu.Lock()
	w := watchOf(tb.Name())
	watchesMu.Unlock()
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closers = append(w.closers, c)
}

// stop is tb's last cleanup: the test ended, in time or not.
func (w *watch) stop() {
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.mu.Unlock()
	close(w.ended)
	watchesMu.Lock()
	if watches[w.tb.Name()] == w {
		delete(watches, w.tb.Name())
	}
	watchesMu.Unlock()
}

// expire runs when the deadline passes before the test has ended: it
// writes every goroutine's stack to stderr (a test's own log is lost if
// it never ends), fails the test, closes what it watches (its servers) and gives it grace to
// end before it ends the test binary.
func (w *watch) expire() {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	closers := w.closers
	fmt.Fprintf(os.Stderr, "servertest: %s is still running %v after it started servers, its deadline (%s multiplies it); its servers are "+
		"killed now. Every goroutine:\n%s\n",
		w.tb.Name(), w.deadline, ScaleEnv, stacks())
	w.tb.Errorf("ran past its deadline of %v: goroutines dumped to stderr, servers killed", w.deadline)
	w.mu.Unlock()
	for _, c := range closers {
		if err := c.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "servertest: %s: killing its servers: %v\n", w.tb.Name(), err)
		}
	}
	select {
	case <-w.ended:
	case <-time.After(grace):
		panic(fmt.Sprintf("servertest: %s still running %v after its deadline of %v, its servers killed", w.tb.Name(), grace, w.deadline))
	}
}

// stacks returns the stack of every goroutine.
func stacks() []byte {
	for n := 1 << 20; ; n *= 2 {
		buf := make([]byte, n)
		if m := runtime.Stack(buf, true); m < n {
			return buf[:m]
		}
	}
}

// Context returns a context for the work of tb, which StartsServers: it
// ends a tenth of tb's deadline (as it stands now) before that deadline,
// leaving the test the rest to report what it saw and to clean up, and
// when tb ends. A fixed timeout of a test's own would not move with
// ScaleEnv and could run out before the deadline it was meant to fit in.
// Without a deadline (tb did not call StartsServers) it ends only when tb
// does.
func Context(tb testing.TB) context.Context {
	tb.Helper()
	watchesMu.Lock()
	w := watchOf(tb.Name())
	watchesMu.Unlock()
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		tb.Cleanup(cancel)
		return ctx
	}
	w.mu.Lock()
	end := w.start.Add(w.deadline - w.deadline/10)
	w.mu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), end)
	tb.Cleanup(cancel)
	return ctx
}
