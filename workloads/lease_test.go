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
// left, on a correct lock, never meet: each releases before its lease
// ends, which its ValidUntil vouches for. The holds stay within the TTL,
// and the case says how it held.
func TestHoldLeft(t *testing.T) {
	for _, tc := range []struct {
		backend string
		nodes   int
		params  map[string]string
	}{
		{"redis", 1, nil},
		{"redlock", 5, map[string]string{"bootstrap": "true", "nodetimeout": "250ms"}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			ttl := 300 * time.Millisecond
			ls := open(t, tc.backend, 3, backends.Config{Addrs: redisAddrs(t, tc.nodes), Params: tc.params})
			spec := workloads.Spec{Workload: workloads.Hot, Clients: 3, HoldLeft: 1, TTL: ttl, Duration: 2 * time.Second}
			c := runCase(t, spec, ls, judge.GuardFence, nil)
			if c.Load != results.LoadValidity || c.HoldLeft != 1 {
				t.Fatalf("case describes its load as %q (hold left %v)", c.Load, c.HoldLeft)
			}
			if c.Acquired < 4 || c.Overlaps != 0 || c.StaleAccepted+c.StaleRejected != 0 || c.LeaseEnds != 0 || c.ValidityLong != 0 {
				t.Fatalf("%d grants, %d overlaps, %d stale writes, %d lease ends, %d leases claiming more than their lock gives; want a few grants and nothing else",
					c.Acquired, c.Overlaps, c.StaleAccepted+c.StaleRejected, c.LeaseEnds, c.ValidityLong)
			}
			if hold := time.Duration(c.HoldUS.Max) * time.Microsecond; hold > ttl {
				t.Fatalf("a hold lasted %v, longer than the TTL %v", hold, ttl)
			}
		})
	}
}

// TestAutoExtendReportsExtensions: leases that extend themselves while
// their holders hold three TTLs keep their keys — no overlap, no lease
// lost — and every extension their watchdogs made reaches the judge.
func TestAutoExtendReportsExtensions(t *testing.T) {
	ttl := 300 * time.Millisecond
	ls := open(t, "redis", 2, backends.Config{Addrs: redisAddrs(t, 1)})
	spec := workloads.Spec{Workload: workloads.Hot, Clients: 2, AutoExtend: true, Hold: dist(t, "900ms"), TTL: ttl,
		Duration: 3 * time.Second, AcquireTimeout: 5 * time.Second}
	c := runCase(t, spec, ls, judge.GuardFence, nil)
	if c.Load != results.LoadAutoExtend {
		t.Fatalf("case describes its load as %q", c.Load)
	}
	// Each section of 900 ms is extended at 100, 200, ... 800 ms.
	if c.Acquired < 2 || c.Extends < 2*c.Acquired || c.ExtendsFailed != 0 {
		t.Fatalf("%d grants, %d extensions (%d failed); want each section extended several times", c.Acquired, c.Extends, c.ExtendsFailed)
	}
	if c.Overlaps != 0 || c.LeaseEnds != 0 || c.Errors[results.ErrLost] != 0 || c.ValidityShort+c.ValidityLong != 0 {
		t.Fatalf("%d overlaps, %d lease ends, %d lost, %d validity departures; want none", c.Overlaps, c.LeaseEnds, c.Errors[results.ErrLost], c.ValidityShort+c.ValidityLong)
	}
	if hold := time.Duration(c.HoldUS.P50) * time.Microsecond; hold < 3*ttl {
		t.Fatalf("median hold %v: the holders did not hold past their TTL", hold)
	}
}
