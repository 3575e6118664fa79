package history

import (
	"strings"
	"testing"
	"time"
)

// TestAmbiguousWidth: an overlap the clock bounds leave undecided reports
// its width; within two of the history's round trips to the judge it stays
// ambiguous, and one far wider (a report delayed 150 ms where reports take
// 1 ms) counts against the lock, as a lock bug, and says why.
func TestAmbiguousWidth(t *testing.T) {
	ms := int64(time.Millisecond)
	grant := func(i, section int64, key string, inv, took, complete int64) Op {
		return Op{Index: int(i), Process: int(section), F: Acquire, Type: OK, Key: key, Section: section, Invoke: inv, Complete: complete,
			WorkerInvoke: 1e15 + inv, WorkerComplete: 1e15 + inv + took, Promise: 1000 * ms, MaxValidity: 1000 * ms}
	}
	end := func(i, section int64, key string, at int64) Op {
		return Op{Index: int(i), Process: int(section), F: End, Type: OK, Key: key, Section: section, Invoke: at, Complete: at}
	}
	for _, tc := range []struct {
		name            string
		inv, complete   int64 // the later grant's, on the judge's clock
		wantAmb, wantLB int64
		wantWidth       int64
	}{
		{"within two round trips", 999 * ms, 1002 * ms, 1, 0, 3 * ms},
		{"a report delayed far beyond them", 900 * ms, 1050 * ms, 0, 1, 150 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ops []Op
			// Five grants of another key set the round trip: each call took
			// 1 ms, and the judge bounded it within 2 ms.
			for i := range int64(5) {
				at := 10*1000*ms + i*10*ms
				ops = append(ops, grant(int64(len(ops)), 10+i, "other", at, ms, at+2*ms), end(int64(len(ops)+1), 10+i, "other", at+5*ms))
			}
			ops = append(ops, grant(int64(len(ops)), 1, "k", 0, ms, 2*ms), grant(int64(len(ops)+1), 2, "k", tc.inv, ms, tc.complete),
				end(int64(len(ops)+2), 1, "k", 1100*ms), end(int64(len(ops)+3), 2, "k", 1200*ms))
			r := Check(ops, "none", false)
			if r.RoundTrip != ms {
				t.Fatalf("round trip %v, want 1ms", time.Duration(r.RoundTrip))
			}
			if r.Overlaps != 1 || r.OverlapsAmbiguous != tc.wantAmb || r.OverlapsLockBug != tc.wantLB || r.OverlapsAmbiguousWide != tc.wantLB ||
				r.AmbiguousWidthMax != tc.wantWidth {
				t.Fatalf("overlaps %d: ambiguous %d, lock bug %d (wide %d), width %v; want ambiguous %d, lock bug %d, width %v",
					r.Overlaps, r.OverlapsAmbiguous, r.OverlapsLockBug, r.OverlapsAmbiguousWide, time.Duration(r.AmbiguousWidthMax),
					tc.wantAmb, tc.wantLB, time.Duration(tc.wantWidth))
			}
			if tc.wantLB > 0 && (r.IncidentsLockBug != 1 || !strings.Contains(strings.Join(r.Examples, "\n"), "counted against the lock")) {
				t.Fatalf("incidents %d lock bug, examples %q: want the wide overlap's incident a lock bug, and why", r.IncidentsLockBug, r.Examples)
			}
		})
	}
}
