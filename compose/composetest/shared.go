package composetest

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/internal/servertest"
)

// Shared is a set of servers that many tests of a package share, such as
// the one-member cluster a conformance suite and the benchmarks run on:
// it starts, in an Env of its own, when a test first asks for it, and
// stops when Close is called, from TestMain (see RunTests). A Shared is
// safe for concurrent use.
type Shared[T any] struct {
	start func(ctx context.Context, e *compose.Env) (T, error)

	once   sync.Once
	closed atomic.Bool
	dir    string
	env    *compose.Env
	val    T
	err    error
}

// NewShared returns a Shared whose servers start calls start, which
// returns what the tests need of them (addresses, a cluster handle).
func NewShared[T any](start func(ctx context.Context, e *compose.Env) (T, error)) *Shared[T] {
	return &Shared[T]{start: start}
}

// Get starts the servers on first use and returns what start returned;
// tb StartsServers (so under -short it is skipped before anything
// starts), and the test that starts them is not charged for their start,
// which has a deadline of its own, DefaultDeadline. It fails tb when the
// servers could not be started (and every later caller too), or after
// Close.
func (s *Shared[T]) Get(tb testing.TB) T {
	tb.Helper()
	StartsServers(tb)
	if s.closed.Load() {
		tb.Fatal("composetest: shared servers used after Close")
	}
	started := false
	s.once.Do(func() {
		started = true
		if s.dir, s.err = os.MkdirTemp("", "lockbench-shared-"); s.err != nil {
			return
		}
		if s.env, s.err = compose.New(s.dir); s.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), servertest.Scaled(DefaultDeadline))
		defer cancel()
		if s.val, s.err = s.start(ctx, s.env); s.err != nil {
			s.err = fmt.Errorf("composetest: starting shared servers: %w", s.err)
		}
	})
	if started { // the start is not charged to tb
		servertest.StartsServersWithin(tb, DefaultDeadline)
	}
	if s.err != nil {
		tb.Fatal(s.err)
	}
	return s.val
}

// Close stops the servers, if they were started, and removes their
// directory.
func (s *Shared[T]) Close() error {
	// A Get after Close fails rather than starting servers nobody stops.
	s.closed.Store(true)
	s.once.Do(func() {})
	if s.env == nil {
		if s.dir != "" {
			return os.RemoveAll(s.dir)
		}
		return nil
	}
	if err := s.env.Close(); err != nil {
		return err
	}
	return os.RemoveAll(s.dir)
}

// RunTests runs m's tests, then closes shared, writing to stderr what
// could not be closed, and returns the exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(composetest.RunTests(m, cluster)) }
func RunTests(m *testing.M, shared ...io.Closer) int {
	code := m.Run()
	for _, s := range shared {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	return code
}
