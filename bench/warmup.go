package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/workloads"
)

// warmupFor is how long each client of a speed trial locks before it is
// measured. On servers started for the trial, the first second is the
// slowest of the run (connections and sessions opened, the servers'
// allocators and caches cold, the Go runtime's heap growing): measured,
// it makes a fresh trial slower than the trials after it on the same
// servers, and widens the spread the rank tests see.
const warmupFor = 500 * time.Millisecond

// warmup runs the lockers of a speed trial (case c without faults)
// unmeasured for warmupFor (less when ctx ends):
// each acquires and releases keys of its own, outside the case's key
// space (they carry the case id and a prefix the judge never sees).
// Errors are not the trial's: the measured run that follows meets them
// again, where they are recorded, so a client stops warming at its first.
func warmup(ctx context.Context, id string, c Case, spec workloads.Spec, lockers []locker.Locker) {
	if c.Fault.Name != "none" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, warmupFor)
	defer cancel()
	var wg sync.WaitGroup
	for i, l := range lockers {
		wg.Go(func() {
			key := fmt.Sprintf("%swarmup:%s:%d", workloads.DefaultKeyPrefix, id, i)
			for ctx.Err() == nil {
				lease, err := l.TryAcquire(ctx, key, locker.WithTTL(spec.TTL))
				if err != nil {
					return
				}
				_ = lease.Release(context.WithoutCancel(ctx))
			}
		})
	}
	wg.Wait()
}
