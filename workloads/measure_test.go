package workloads

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends/noop"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

func TestClassify(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	expired, cancel2 := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancel2()
	node := &locker.NodeError{Node: "127.0.0.1:7000", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"success", live, nil, ""},
		{"refused", live, fmt.Errorf("acquire %q: %w", "k", locker.ErrNotAcquired), results.ErrNotAcquired},
		{"refused with a node down", live, errors.Join(fmt.Errorf("%w: 2 of 3", locker.ErrNotAcquired), node), results.ErrNode},
		{"node error alone", live, node, results.ErrNode},
		{"unavailable", live, fmt.Errorf("x: %w", locker.ErrUnavailable), results.ErrNode},
		{"not held", live, fmt.Errorf("release: %w", locker.ErrNotHeld), results.ErrLost},
		{"lost", live, fmt.Errorf("%w: session expired", locker.ErrLost), results.ErrLost},
		{"acquire deadline", expired, fmt.Errorf("%w (last attempt: %w)", context.DeadlineExceeded, locker.ErrNotAcquired), results.ErrTimeout},
		{"backend deadline", live, context.DeadlineExceeded, results.ErrTimeout},
		{"abandoned", cancelled, fmt.Errorf("%w (last attempt: %w)", context.Canceled, locker.ErrNotAcquired), ""},
		{"other", live, errors.New("boom"), results.ErrOther},
		{"nil context", nil, errors.New("boom"), results.ErrOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.ctx, tc.err); got != tc.want {
				t.Fatalf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestMeasureRecordsOperations(t *testing.T) {
	defer goleak.VerifyNone(t)
	l := noop.New()
	defer l.Close()
	start := time.Now()
	rec := NewRecorder()
	m := Measure(l, rec)
	ctx := context.Background()

	// A lease held and released: one grant, one hold, one release.
	lease, err := m.AcquireFrom(ctx, start.Add(-50*time.Millisecond), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A lease that expires while held: its Release says ErrNotHeld, and a
	// second Release and an Extend do not count it again.
	lease, err = m.TryAcquire(ctx, "k", locker.WithTTL(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	if err := lease.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Release of an expired lease: %v", err)
	}
	_ = lease.Release(ctx)
	_ = lease.Extend(ctx, time.Second)
	// A refused acquire (bad TTL is ErrInvalid: other) and an abandoned one.
	if _, err := m.Acquire(ctx, "k", locker.WithTTL(-1)); err == nil {
		t.Fatal("negative TTL accepted")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Acquire(cancelled, "k"); err == nil {
		t.Fatal("acquire with a cancelled context succeeded")
	}

	got := rec.Metrics()
	if got.Acquired != 2 || got.Acquire.TotalCount() != 2 || got.Hold.TotalCount() != 2 || got.Release.TotalCount() != 1 {
		t.Fatalf("acquired %d, counts acquire %d hold %d release %d; want 2, 2, 2, 1",
			got.Acquired, got.Acquire.TotalCount(), got.Hold.TotalCount(), got.Release.TotalCount())
	}
	if want := map[string]int64{results.ErrLost: 1, results.ErrOther: 1}; fmt.Sprint(got.Errors) != fmt.Sprint(want) {
		t.Fatalf("errors %v, want %v", got.Errors, want)
	}
	// The first acquire waited from its intended start, 50 ms before.
	if got.Acquire.Max() < 50_000 {
		t.Fatalf("acquire wait max %d µs: AcquireFrom did not count from the intended start", got.Acquire.Max())
	}
	if m.Info().Name != "noop" || m.Unwrap() != locker.Locker(l) {
		t.Fatal("Measured does not pass Info and Unwrap through")
	}
	enc, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	h, err := results.Decode(enc.Histograms.Hold)
	if err != nil || h.TotalCount() != 2 || enc.Acquired != 2 || enc.Errors[results.ErrLost] != 1 {
		t.Fatalf("encoded metrics %+v (hold histogram %v, %v)", enc, h, err)
	}
}
