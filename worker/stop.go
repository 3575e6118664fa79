package worker

import (
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ArmSignal arms a worker to stop itself (SIGSTOP of its whole process)
// at its next grant, between Acquire's return and the grant's report to
// the judge: the moment a client pause aimed at "granted" hits, which no
// signal from outside can aim at (the window lasts microseconds). The
// nemesis sends it, waits until the process has stopped, and resumes it.
const ArmSignal = syscall.SIGUSR1

// ArmWindow is how long an arm lasts: a worker that has not been granted
// within it ignores it, so that a nemesis that gave up waiting (and will
// not resume it) never finds it stopped later.
const ArmWindow = 5 * time.Second

// stopAtGrant installs the handler of ArmSignal and returns what the
// client calls at each grant, and a func that removes the handler.
func stopAtGrant() (granted func(), stop func()) {
	var armed atomic.Int64 // when the last arm came (Unix ns); 0: none
	stop = onSignal(ArmSignal, func() { armed.Store(time.Now().UnixNano()) })
	granted = func() {
		at := armed.Swap(0)
		if at == 0 || time.Since(time.Unix(0, at)) > ArmWindow {
			return
		}
		// SIGSTOP to this very thread (tgkill): it stops on its return
		// from the call, before it can report, and the group stop takes
		// every other thread of the process with it. (kill(getpid) lets
		// the kernel hand the signal to another thread, and this one
		// reports the grant meanwhile: measured, a third of the pauses
		// landed after the report.) The nemesis sends SIGCONT.
		runtime.LockOSThread()
		_ = unix.Tgkill(os.Getpid(), unix.Gettid(), syscall.SIGSTOP)
		runtime.UnlockOSThread()
	}
	return granted, stop
}

// onSignal calls f, on a goroutine of its own, each time the process
// receives sig, until the func it returns is called.
func onSignal(sig os.Signal, f func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				f()
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
