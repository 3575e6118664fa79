package locktest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// ExclusionReport is what Exclusion observed.
type ExclusionReport struct {
	// Sections is how many critical sections completed.
	Sections int
	// Overlaps counts sections entered while another was inside: each is
	// a mutual-exclusion violation.
	Overlaps int
	// TokenRegressions counts grants whose fencing token was not above the
	// token of the section before it (0 when the backend has no tokens).
	TokenRegressions int
}

// Exclusion runs workers goroutines, spread round-robin over lockers, that
// each take key sections times and spend a little time inside. An overlap
// detector counts the sections that overlapped. It returns the first
// acquire or release error, if any, with what it saw until then.
func Exclusion(ctx context.Context, lockers []locker.Locker, key string, workers, sections int) (ExclusionReport, error) {
	if len(lockers) == 0 || workers < 1 || sections < 1 {
		return ExclusionReport{}, locker.Invalidf("exclusion needs lockers (%d), workers (%d) and sections (%d)", len(lockers), workers, sections)
	}
	var (
		inside    atomic.Int32
		overlaps  atomic.Int64
		completed atomic.Int64

		mu         sync.Mutex // guards the token order, taken inside the section
		lastToken  uint64
		haveToken  bool
		regression int
	)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for w := range workers {
		l := lockers[w%len(lockers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range sections {
				lease, err := l.Acquire(ctx, key, locker.WithTTL(time.Minute))
				if err != nil {
					cancel(fmt.Errorf("worker %d: acquire: %w", w, err))
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				if tok, ok := lease.Token(); ok {
					mu.Lock()
					if haveToken && tok <= lastToken {
						regression++
					}
					lastToken, haveToken = tok, true
					mu.Unlock()
				}
				// Stay inside long enough that an unprotected section is
				// all but certain to be seen by another worker.
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				completed.Add(1)
				if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
					cancel(fmt.Errorf("worker %d: release: %w", w, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	r := ExclusionReport{Sections: int(completed.Load()), Overlaps: int(overlaps.Load()), TokenRegressions: regression}
	if err := context.Cause(ctx); err != nil {
		return r, err
	}
	return r, nil
}
