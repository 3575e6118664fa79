package workloads

import (
	"context"
	"testing"

	"github.com/lockbench/lockbench/backends/noop"
)

// BenchmarkMeasuredNoop is the decorator's cost per operation over a lock
// that does nothing: what Measure adds to every acquire and release.
func BenchmarkMeasuredNoop(b *testing.B) {
	for _, measured := range []bool{false, true} {
		name := "bare"
		if measured {
			name = "measured"
		}
		b.Run(name, func(b *testing.B) {
			l := noop.New()
			defer l.Close()
			var acquire = l.Acquire
			if measured {
				acquire = Measure(l, NewRecorder()).Acquire
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lease, err := acquire(ctx, "k")
				if err != nil {
					b.Fatal(err)
				}
				_ = lease.Release(ctx)
			}
		})
	}
}
