package remote

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// hostNetns is the network namespace this process runs in. Threads enter
// another namespace only while locked by inNetns, which brings them back
// (or lets the runtime discard them), so any other thread is in this one.
var hostNetns = sync.OnceValues(func() (*os.File, error) {
	var f *os.File
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var err error
		f, err = os.Open("/proc/thread-self/ns/net")
		errc <- err
	}()
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("this process's network namespace: %w", err)
	}
	return f, nil
})

// onThread runs f on an OS thread of its own, locked to it, then returns
// the thread to this process's network namespace. If it cannot, the
// goroutine ends still locked and the Go runtime destroys the thread
// rather than run other goroutines in a foreign namespace.
func onThread(f func() error) error {
	host, err := hostNetns()
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := f()
		if rerr := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); rerr != nil {
			errc <- errors.Join(err, fmt.Errorf("back to this process's network namespace: %w", rerr))
			return // locked: the thread dies with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// inNetns runs f on a thread inside the network namespace ns: a process
// that f starts is born in it. ns nil runs f here.
func inNetns(ns *os.File, f func() error) error {
	if ns == nil {
		return f()
	}
	return onThread(func() error {
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter network namespace: %w", err)
		}
		return f()
	})
}

// NewNetns creates an empty network namespace (not even its loopback is
// up) and returns it as an open file. The kernel frees it, with every link
// in it, once the file is closed and no process runs in it. Creating one
// needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN).
func NewNetns() (*os.File, error) {
	var f *os.File
	err := onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		var err error
		f, err = os.Open("/proc/thread-self/ns/net")
		return err
	})
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("remote: creating a network namespace: %w", err)
	}
	return f, nil
}
