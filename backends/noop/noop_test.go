package noop_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends/noop"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// TestExclusionCatchesNoop proves that the conformance suite's
// mutual-exclusion check can fail: noop excludes nobody, and the check
// must see it.
func TestExclusionCatchesNoop(t *testing.T) {
	defer goleak.VerifyNone(t)
	lockers := []locker.Locker{noop.New(), noop.New()}
	defer func() {
		for _, l := range lockers {
			l.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := locktest.Exclusion(ctx, lockers, "hot", 16, 20)
	if err != nil {
		t.Fatal(err)
	}
	if r.Overlaps == 0 {
		t.Fatalf("Exclusion saw no overlap in %d sections of a lock that excludes nobody", r.Sections)
	}
	t.Logf("noop: %d of %d sections overlapped", r.Overlaps, r.Sections)
}

func TestNoopGrantsEverything(t *testing.T) {
	l := noop.New()
	defer l.Close()
	ctx := context.Background()
	a, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("noop refused a held key: %v", err)
	}
	if _, ok := a.Token(); ok {
		t.Fatal("noop issued a fencing token")
	}
	for _, lease := range []locker.Lease{a, b} {
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.TryAcquire(ctx, ""); err == nil {
		t.Fatal("noop accepted an empty key")
	}
}
