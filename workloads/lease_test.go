package workloads_test

import (
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// TestHoldLeft: holders that hold up to all the validity their lease has
// left, on a correct lock, are never overtaken before their lease's
// contract line — no lock-bug overlap — and no lease claims more than its
// lock gives. A holder that drew nearly all its validity may write and
// release past it on a loaded machine (its timer fires late): that is an
// expired holder, a lease end, a stale write its fence rejects, all
// counted and none asserted away. The holds are a fraction of the
// validity, not the 1 ms of --hold, and the case says how it held.
func TestHoldLeft(t *testing.T) {
	for _, tc := range []struct {
		backend string
		nodes   int
		params  map[string]string
	}{
		{"redis", 1, nil},
		{"redlock", 5, map[string]string{"bootstrap": "force", "nodetimeout": "250ms"}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			ttl := 300 * time.Millisecond
			ls := open(t, tc.backend, 3, backends.Config{Addrs: redisAddrs(t, tc.nodes), Params: tc.params})
			spec := workloads.Spec{Workload: workloads.Hot, Clients: 3, HoldLeft: 1, TTL: ttl, Duration: 2 * time.Second}
			c := runCase(t, spec, ls, judge.GuardFence, nil)
			if c.Load != results.LoadValidity || c.HoldLeft != 1 {
				t.Fatalf("case describes its load as %q (hold left %v)", c.Load, c.HoldLeft)
			}
			t.Logf("%d lease ends, %d expired-holder overlaps, %d stale writes rejected", c.LeaseEnds, c.OverlapsExpiredHolder, c.StaleRejected)
			if c.Acquired < 4 || c.OverlapsLockBug != 0 || c.ValidityLong != 0 {
				t.Fatalf("%d grants, %d lock-bug overlaps, %d leases claiming more than their lock gives; want a few grants and neither",
					c.Acquired, c.OverlapsLockBug, c.ValidityLong)
			}
			if hold := time.Duration(c.HoldUS.P50) * time.Microsecond; hold < ttl/10 {
				t.Fatalf("median hold %v: the holders did not hold a fraction of their validity (TTL %v)", hold, ttl)
			}
		})
	}
}

// TestAutoExtendReportsExtensions: leases that extend themselves while
// their holders hold three TTLs keep their keys — no overlap, no lease
// lost, no extension refused (one that raced its holder's release is not
// refused) — and every extension their watchdogs made reaches the judge.
func TestAutoExtendReportsExtensions(t *testing.T) {
	// A TTL of 500 ms: the watchdog, every TTL/3, loses its lease only if
	// an extension is held up by a third of a second.
	ttl := 500 * time.Millisecond
	ls := open(t, "redis", 2, backends.Config{Addrs: redisAddrs(t, 1)})
	spec := workloads.Spec{Workload: workloads.Hot, Clients: 2, AutoExtend: true, Hold: dist(t, "1500ms"), TTL: ttl,
		Duration: 3500 * time.Millisecond, AcquireTimeout: 5 * time.Second}
	c := runCase(t, spec, ls, judge.GuardFence, nil)
	if c.Load != results.LoadAutoExtend {
		t.Fatalf("case describes its load as %q", c.Load)
	}
	// Each section of 1.5 s is extended about every 167 ms.
	if c.Acquired < 2 || c.Extends < 2*c.Acquired || c.ExtendsFailed != 0 {
		t.Fatalf("%d grants, %d extensions (%d failed); want each section extended several times", c.Acquired, c.Extends, c.ExtendsFailed)
	}
	if c.Overlaps != 0 || c.LeaseEnds != 0 || c.Errors[results.ErrLost] != 0 || c.ValidityShort+c.ValidityLong != 0 {
		t.Fatalf("%d overlaps, %d lease ends, %d lost, %d validity departures; want none", c.Overlaps, c.LeaseEnds, c.Errors[results.ErrLost], c.ValidityShort+c.ValidityLong)
	}
	if hold := time.Duration(c.HoldUS.P50) * time.Microsecond; hold < 2*ttl {
		t.Fatalf("median hold %v: the holders did not hold past their TTL", hold)
	}
}
