package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/noop"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/workloads"
)

// counting counts the grants of a locker.
type counting struct {
	locker.Locker
	grants atomic.Int64
}

func (c *counting) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	l, err := c.Locker.TryAcquire(ctx, key, opts...)
	if err == nil {
		c.grants.Add(1)
	}
	return l, err
}

// TestWarmup: a speed trial's clients lock before they are measured,
// each on a key of its own, and a case under a fault is not warmed (its
// first seconds are what the fault tests).
func TestWarmup(t *testing.T) {
	for _, tt := range []struct {
		fault string
		warm  bool
	}{{"none", true}, {"restart", false}} {
		ls := []*counting{{Locker: noop.New()}, {Locker: noop.New()}}
		start := time.Now()
		warmup(context.Background(), "001", Case{Fault: nemesis.Fault{Scenario: &nemesis.Scenario{Name: tt.fault}}}, workloads.Spec{TTL: time.Second},
			[]locker.Locker{ls[0], ls[1]})
		for i, l := range ls {
			if got := l.grants.Load() > 0; got != tt.warm {
				t.Errorf("fault %s: client %d granted %d times while warming, want warm %v", tt.fault, i, l.grants.Load(), tt.warm)
			}
		}
		if took := time.Since(start); tt.warm && took < warmupFor {
			t.Errorf("warmed for %v, want %v", took, warmupFor)
		}
	}
}
