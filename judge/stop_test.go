package judge

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// hang bounds the waits of these tests: not a speed they assert, the
// point past which a wait is stuck for good.
const hang = 30 * time.Second

// eventually polls cond until it holds, failing the test when it has not
// after hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting, after %v, for %s", hang, what)
		}
		runtime.Gosched()
	}
}

// blockedIn waits until a goroutine is blocked in a select inside fn (as
// a stack trace names it, e.g. "judge.(*Case).finish"): the call under
// test has reached its wait.
func blockedIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	eventually(t, "a goroutine waiting in "+fn, func() bool {
		n := runtime.Stack(buf, true)
		for g := range bytes.SplitSeq(buf[:n], []byte("\n\n")) {
			header, _, _ := bytes.Cut(g, []byte("\n"))
			if bytes.Contains(header, []byte("[select")) && bytes.Contains(g, []byte(fn+"(")) {
				return true
			}
		}
		return false
	})
}

// connections is the number of connections the judge serves.
func connections(j *Judge) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.conns)
}

// waiter is a call that waits on the judge: start sets the scene and
// makes the call, whose error goes to the channel; fn is where the judge
// waits for it; lost says what the case shows when the caller's
// connection drops (nil when the caller is in process).
type waiter struct {
	name  string
	hosts int
	start func(t *testing.T, j *Judge, errs chan<- error) (hangUp func())
	fn    string
	lost  func(c *Case) bool
}

func waiters() []waiter {
	cancelled := func(c *Case) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.cancelErr != nil && strings.Contains(c.cancelErr.Error(), errConnLost.Error())
	}
	stopping := func(c *Case) bool { return c.stoppingLocked() }
	return []waiter{
		{name: "a host waiting for the other hosts", hosts: 2, fn: "judge.(*Judge).Open", lost: cancelled,
			start: func(t *testing.T, j *Judge, errs chan<- error) func() {
				r, err := DialRemote(context.Background(), j.Addr())
				if err != nil {
					t.Fatal(err)
				}
				go func() { _, err := r.Open(context.Background(), "a", spec("w", 1)); errs <- err }()
				return func() { r.Close() }
			}},
		{name: "a host in process waiting for the other hosts", hosts: 2, fn: "judge.(*Judge).Open",
			start: func(t *testing.T, j *Judge, errs chan<- error) func() {
				go func() { _, err := j.Open(context.Background(), "a", spec("w", 1)); errs <- err }()
				return nil
			}},
		{name: "a client at the start barrier", hosts: 1, fn: "judge.awaitStart", lost: cancelled,
			start: func(t *testing.T, j *Judge, errs chan<- error) func() {
				if _, err := j.Open(context.Background(), "h", spec("w", 2)); err != nil {
					t.Fatal(err)
				}
				a := dialClient(t, j, "w", "h", 0)
				go func() { _, err := a.conn.Ready(context.Background()); errs <- err }()
				return func() { a.conn.Close() }
			}},
		{name: "a host waiting for its clients", hosts: 1, fn: "judge.(*Case).finish", lost: stopping,
			start: func(t *testing.T, j *Judge, errs chan<- error) func() {
				info, err := j.Open(context.Background(), "h", spec("w", 1))
				if err != nil {
					t.Fatal(err)
				}
				a := dialClient(t, j, "w", "h", 0)
				start(t, a)
				a.grant(info.KeyPrefix+"hot", 1, time.Second) // and holds on
				r, err := DialRemote(context.Background(), j.Addr())
				if err != nil {
					t.Fatal(err)
				}
				go func() { _, err := r.Finish(context.Background(), "h", "w"); errs <- err }()
				return func() { r.Close() }
			}},
	}
}

// TestCloseEndsEveryWait closes the judge while a host or a client waits
// on it: Close returns, the wait ends with an error, and no goroutine is
// left behind.
func TestCloseEndsEveryWait(t *testing.T) {
	for _, w := range waiters() {
		t.Run(w.name, func(t *testing.T) {
			t.Cleanup(func() { goleak.VerifyNone(t) }) // last: after every other cleanup
			j := served(t, Options{Hosts: w.hosts})
			errs := make(chan error, 1)
			w.start(t, j, errs)
			blockedIn(t, w.fn)
			closed := make(chan error, 1)
			began := time.Now()
			go func() { closed <- j.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("Close: %v", err)
				}
				t.Logf("Close returned in %v", time.Since(began))
			case <-time.After(hang):
				t.Fatalf("Close still blocked after %v", hang)
			}
			err := <-errs
			if err == nil {
				t.Fatal("the wait ended without an error when the judge closed")
			}
			if w.lost == nil && !errors.Is(err, ErrClosed) {
				t.Errorf("in-process wait ended with %v, want ErrClosed", err)
			}
			t.Logf("the wait ended with: %v", err)
		})
	}
}

// TestALostConnectionEndsItsWait drops the connection of a host or client
// while it waits: the judge's handler ends at once, and the case hears of
// it (cancelled before its start, stopped after).
func TestALostConnectionEndsItsWait(t *testing.T) {
	for _, w := range waiters() {
		if w.lost == nil {
			continue // no connection to lose
		}
		t.Run(w.name, func(t *testing.T) {
			t.Cleanup(func() { goleak.VerifyNone(t) })
			j := served(t, Options{Hosts: w.hosts})
			errs := make(chan error, 1)
			hangUp := w.start(t, j, errs)
			blockedIn(t, w.fn)
			c, before := j.Case("w"), connections(j)
			hangUp()
			if err := <-errs; err == nil {
				t.Fatal("the wait returned no error after its connection closed")
			}
			eventually(t, "the case to hear of the lost connection", func() bool { return w.lost(c) })
			eventually(t, "the judge to drop its connections", func() bool { return connections(j) == before-1 })
		})
	}
}
