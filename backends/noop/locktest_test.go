package noop_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends/noop"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// TestMeasure runs exactly as many operations as more allows, over every
// client, and reports them: sorted latencies of the successes, the
// failures and the first failure's error.
func TestMeasure(t *testing.T) {
	defer goleak.VerifyNone(t)
	var budget atomic.Int64
	budget.Store(300)
	boom := errors.New("boom")
	var calls atomic.Int64
	op := func(context.Context) error {
		if calls.Add(1)%10 == 0 {
			return boom
		}
		time.Sleep(50 * time.Microsecond) // the operation's work
		return nil
	}
	s := locktest.Measure(context.Background(), []locktest.Op{op, op, op}, func() bool { return budget.Add(-1) >= 0 })
	if calls.Load() != 300 || len(s.Latencies)+s.Failures != 300 || s.Failures != 30 {
		t.Fatalf("%d calls, %d successes, %d failures: want 300 = 270 + 30", calls.Load(), len(s.Latencies), s.Failures)
	}
	if !errors.Is(s.FirstErr, boom) {
		t.Fatalf("first error %v, want boom", s.FirstErr)
	}
	if !slices.IsSorted(s.Latencies) || s.Percentile(0) < 50*time.Microsecond || s.Percentile(0.5) > s.Percentile(1) {
		t.Fatalf("latencies not sorted or too short: p0 %v p50 %v max %v", s.Percentile(0), s.Percentile(0.5), s.Percentile(1))
	}
	if s.Throughput() <= 0 || s.Throughput() > float64(len(s.Latencies))/s.Elapsed.Seconds()+1 {
		t.Fatalf("throughput %v for %d ops in %v", s.Throughput(), len(s.Latencies), s.Elapsed)
	}
	if (locktest.Sample{}).Percentile(0.99) != 0 || (locktest.Sample{}).Throughput() != 0 {
		t.Fatal("an empty sample must report zeros")
	}
}

// keyLog counts the keys asked of keyRecorders.
type keyLog struct {
	mu   sync.Mutex
	keys map[string]int
}

// keyRecorder is a real noop Locker that records the keys asked of it.
type keyRecorder struct {
	locker.Locker
	log *keyLog
}

func (k keyRecorder) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	k.log.mu.Lock()
	k.log.keys[key]++
	k.log.mu.Unlock()
	return k.Locker.Acquire(ctx, key, opts...)
}

// TestLockerOps gives every client the same key when hot, and its own
// otherwise; Lockers shares one Locker or makes one per client.
func TestLockerOps(t *testing.T) {
	for _, tc := range []struct {
		hot, shared bool
		keys        int
	}{{true, true, 1}, {false, true, 4}, {true, false, 1}, {false, false, 4}} {
		log := &keyLog{keys: map[string]int{}}
		opened := 0
		lockers := locktest.Lockers(t, func(testing.TB) locker.Locker {
			opened++
			return keyRecorder{Locker: noop.New(), log: log}
		}, 4, tc.shared)
		for _, op := range locktest.LockerOps(t, lockers, tc.hot) {
			if err := op(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if want := map[bool]int{true: 1, false: 4}[tc.shared]; opened != want {
			t.Errorf("shared=%v: %d Lockers opened, want %d", tc.shared, opened, want)
		}
		if len(log.keys) != tc.keys {
			t.Errorf("hot=%v: keys %v, want %d distinct", tc.hot, log.keys, tc.keys)
		}
	}
}

// TestCompare measures two contenders in turns until each has run its
// time, and returns their samples in order. Which sample is whose is
// told by what the machine cannot change: how many operations each ran,
// and the slow one's 1 ms sleep in every operation (a comparison of
// their speeds failed on a busy machine, whose turns are not alike).
func TestCompare(t *testing.T) {
	defer goleak.VerifyNone(t)
	var ran [2]atomic.Int64
	slow := func(tb testing.TB, key string) locktest.Op {
		return func(ctx context.Context) error {
			ran[0].Add(1)
			time.Sleep(time.Millisecond)
			return locktest.AcquireRelease(noop.New(), key)(ctx)
		}
	}
	fast := func(tb testing.TB, key string) locktest.Op {
		op := locktest.AcquireRelease(noop.New(), key)
		return func(ctx context.Context) error {
			ran[1].Add(1)
			return op(ctx)
		}
	}
	samples := locktest.Compare(t, []locktest.Contender{{Name: "slow", Client: slow}, {Name: "fast", Client: fast}},
		2, 20*time.Millisecond, 100*time.Millisecond)
	if len(samples) != 2 {
		t.Fatalf("%d samples, want 2", len(samples))
	}
	for i, s := range samples {
		if s.Elapsed < 100*time.Millisecond || len(s.Latencies) == 0 || s.Failures != 0 {
			t.Fatalf("contender %d: %d ops, %d failures in %v: want 100ms of work, no failure", i, len(s.Latencies), s.Failures, s.Elapsed)
		}
		// Each of the 2 clients made a first operation, not measured.
		if n := int64(len(s.Latencies)); n+2 != ran[i].Load() {
			t.Fatalf("contender %d ran %d operations (2 of them first ones), its sample has %d", i, ran[i].Load(), n)
		}
	}
	if p0 := samples[0].Percentile(0); p0 < time.Millisecond {
		t.Fatalf("the slow contender's fastest operation took %v, under its 1 ms sleep: not its sample", p0)
	}
}
