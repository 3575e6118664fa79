package composetest

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
)

// grace is how long a test that ran past its deadline, and whose servers
// were then killed, has to end before the test binary panics. (A variable
// for this package's tests.)
var grace = 10 * time.Second

// A watch is the deadline of one test that starts servers.
type watch struct {
	tb    testing.TB
	start time.Time
	ended chan struct{} // closed when tb's cleanups have run

	mu       sync.Mutex
	deadline time.Duration // from start
	timer    *time.Timer
	done     bool // tb ended in time
	envs     []*compose.Env
}

// watches holds the watch of every test that started servers and has not
// ended, by its testing.TB.
var watches sync.Map

// arm arms tb's deadline d from now, or, if tb has one already, moves it
// to d from the first call when that is later. The first call's cleanup
// is registered before the Env's, so it runs after them: closing the
// servers counts.
func arm(tb testing.TB, d time.Duration) {
	w := &watch{tb: tb, start: time.Now(), deadline: d, ended: make(chan struct{})}
	if v, loaded := watches.LoadOrStore(tb, w); loaded {
		w = v.(*watch)
		w.mu.Lock()
		defer w.mu.Unlock()
		if d > w.deadline && !w.done && w.timer.Stop() {
			w.deadline = d
			w.timer.Reset(time.Until(w.start.Add(d)))
		}
		return
	}
	w.mu.Lock()
	w.timer = time.AfterFunc(d, w.expire)
	w.mu.Unlock()
	tb.Cleanup(w.stop)
}

// watching adds e to the Envs whose servers tb's deadline kills.
func watching(tb testing.TB, e *compose.Env) {
	v, ok := watches.Load(tb)
	if !ok {
		return
	}
	w := v.(*watch)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.envs = append(w.envs, e)
}

// stop is tb's last cleanup: the test ended, in time or not.
func (w *watch) stop() {
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.mu.Unlock()
	close(w.ended)
	watches.Delete(w.tb)
}

// expire runs when the deadline passes before the test has ended: it
// writes every goroutine's stack to stderr (a test's own log is lost if
// it never ends), fails the test, kills its servers and gives it grace to
// end before it ends the test binary.
func (w *watch) expire() {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	envs := w.envs
	fmt.Fprintf(os.Stderr, "composetest: %s is still running %v after it started servers, its deadline (%s multiplies it); its servers are killed now. Every goroutine:\n%s\n",
		w.tb.Name(), w.deadline, ScaleEnv, stacks())
	w.tb.Errorf("ran past its deadline of %v: goroutines dumped to stderr, servers killed", w.deadline)
	w.mu.Unlock()
	for _, e := range envs {
		if err := e.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "composetest: %s: killing its servers: %v\n", w.tb.Name(), err)
		}
	}
	select {
	case <-w.ended:
	case <-time.After(grace):
		panic(fmt.Sprintf("composetest: %s still running %v after its deadline of %v, its servers killed", w.tb.Name(), grace, w.deadline))
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
