package worker

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ClockSignal makes a worker stop its whole process (SIGSTOP) at once,
// wherever its client is, with its lock clock (backends.Config.Clock)
// standing still from that moment until the nemesis resumes it: the clock
// never counts the stop, as the monotonic clock of a virtual machine
// suspended at that moment does not count the suspension, and runs
// behind by it from then on. Only a backend whose client takes the clock
// (backends.Descriptor.ClientClock) reads it, to measure a lease's
// validity; the worker's own times, which the judge sees, stay on Go's
// clock.
const ClockSignal = syscall.SIGUSR2

// stallClock is a worker's lock clock.
type stallClock struct {
	mu       sync.Mutex
	frozenAt time.Time     // when the clock stopped; zero while it runs
	lost     time.Duration // the stops it did not count
}

// newStallClock installs the handler of ClockSignal and returns the clock
// and a func that removes the handler.
func newStallClock() (*stallClock, func()) {
	c := &stallClock{}
	return c, onSignal(ClockSignal, c.stall)
}

// now reads the clock: Go's, less the stops it missed; while the process
// is stopped, and until the stop is accounted for, the moment it stopped.
func (c *stallClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.frozenAt.IsZero() {
		return c.frozenAt.Add(-c.lost)
	}
	return time.Now().Add(-c.lost)
}

// stall stands the clock still and stops the process on this very
// thread (tgkill, as stopAtGrant does); once resumed, it adds the stop to
// what the clock missed and lets it run again.
func (c *stallClock) stall() {
	c.mu.Lock()
	c.frozenAt = time.Now()
	c.mu.Unlock()
	runtime.LockOSThread()
	_ = unix.Tgkill(os.Getpid(), unix.Gettid(), syscall.SIGSTOP)
	runtime.UnlockOSThread()
	c.mu.Lock()
	c.lost += time.Since(c.frozenAt)
	c.frozenAt = time.Time{}
	c.mu.Unlock()
}
