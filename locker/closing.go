package locker

import (
	"context"
	"sync"
)

// Closing is the state a Locker's Close shares with its leases and with
// the work in flight, which every backend would otherwise write again: a
// flag that refuses new work once Close has begun, a context that ends
// then (its cause ErrClosed: the parent to give NewLease, whose leases
// then end with ErrLost wrapping ErrClosed) and a count of the work Close
// waits for (acquisitions in flight, sessions still held, goroutines).
//
// A Locker's Close calls Begin, ends what only the backend can end (for
// example a connection whose reads hold its goroutines), then Wait:
//
//	func (l *Locker) Close() error {
//		if !l.closing.Begin() {
//			return nil // not the first call
//		}
//		l.closing.Wait()
//		return l.client.Close()
//	}
//
// and its operations count themselves in:
//
//	if err := l.closing.Add(); err != nil {
//		return nil, fmt.Errorf("acquire %q: %w", key, err)
//	}
//	defer l.closing.Done()
//	ctx, cancel := l.closing.Bind(ctx) // Close interrupts it
//	defer cancel()
//
// A Close in stages — Redlock's ends its operations, then releases its
// leases' keys, then ends the leases and its background work — uses one
// Closing per stage, each begun and waited for in turn.
//
// The zero value is ready to use. A Closing must not be copied after
// first use.
type Closing struct {
	init   sync.Once
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	closed bool
	work   sync.WaitGroup
}

func (c *Closing) start() {
	c.init.Do(func() { c.ctx, c.cancel = context.WithCancelCause(context.Background()) })
}

// Context returns a context that ends, with cause ErrClosed, when Begin is
// first called.
func (c *Closing) Context() context.Context {
	c.start()
	return c.ctx
}

// Err returns ErrClosed once Begin has been called, and nil before.
func (c *Closing) Err() error {
	if c.Context().Err() != nil {
		return ErrClosed
	}
	return nil
}

// Bind returns a context that ends when ctx ends or when Begin is called
// (its cause then ErrClosed), so that Close does not wait on an operation
// whose caller's ctx never ends. Call the CancelFunc when the operation
// is over.
func (c *Closing) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	bound, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.Context(), func() { cancel(ErrClosed) })
	return bound, func() {
		stop()
		cancel(nil)
	}
}

// Add counts one piece of work that Wait waits for, and returns nil; the
// caller calls Done when it is over. Once Begin has been called it counts
// nothing and returns ErrClosed.
func (c *Closing) Add() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.work.Add(1)
	return nil
}

// Done ends a piece of work that Add counted.
func (c *Closing) Done() { c.work.Done() }

// Go runs f on a goroutine of its own that Wait waits for, and returns
// true; once Begin has been called it does not run f and returns false.
func (c *Closing) Go(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		f()
	}()
	return true
}

// Begin starts closing: from now on Add and Go refuse new work and Err
// returns ErrClosed, and Context ends with cause ErrClosed. It reports
// whether this was the first call, which is the one whose Close goes on
// to close the rest.
func (c *Closing) Begin() bool {
	c.start()
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	c.mu.Unlock()
	c.cancel(ErrClosed)
	return first
}

// Wait waits until all the work counted by Add and Go is over. Call it
// after Begin, so that no new work can be counted meanwhile.
func (c *Closing) Wait() { c.work.Wait() }
