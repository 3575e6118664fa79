package workloads

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/noop"
)

// BenchmarkResourceSection is the checker's cost per critical section:
// Begin, Write and End on one key.
func BenchmarkResourceSection(b *testing.B) {
	res, _ := NewResource(GuardFence)
	g := Grant{Key: "k", HasToken: true}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.Token = uint64(i + 1)
		s := res.Begin(g)
		s.Write()
		s.End()
	}
}

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
			rec, _ := NewRecorder(time.Now(), time.Second)
			var acquire = l.Acquire
			if measured {
				acquire = Measure(l, rec).Acquire
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
