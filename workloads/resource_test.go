package workloads

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/locker"
)

// step is one call of a constructed history: op on the section named s.
// grant and begin create the section with key k and token tok (tok 0 is
// no token); write expects the guard's verdict want.
type step struct {
	op   string // grant, begin, read, write, end
	s    string
	k    string
	tok  uint64
	want bool
}

func grant(s, k string, tok uint64) step { return step{op: "grant", s: s, k: k, tok: tok} }
func begin(s, k string, tok uint64) step { return step{op: "begin", s: s, k: k, tok: tok} }
func read(s string) step                 { return step{op: "read", s: s} }
func write(s string, want bool) step     { return step{op: "write", s: s, want: want} }
func end(s string) step                  { return step{op: "end", s: s} }

// counts are the safety counts a history must produce.
type counts struct {
	overlaps, staleAccepted, staleRejected, lost, regressions, rejectedCurrent, unfenced int64
}

func countsOf(r Report) counts {
	return counts{r.Overlaps, r.StaleAccepted, r.StaleRejected, r.LostUpdates, r.TokenRegressions, r.RejectedCurrent, r.Unfenced}
}

// replay makes the calls of a history, in order, on a fresh resource, and
// checks every write's verdict.
func replay(t *testing.T, g Guard, history []step) Report {
	t.Helper()
	res, err := NewResource(g)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]*Section{}
	for i, st := range history {
		s := sections[st.s]
		switch st.op {
		case "grant", "begin":
			gr := Grant{Key: st.k, Token: st.tok, HasToken: st.tok != 0}
			var sec Section
			if st.op == "grant" {
				sec = res.Grant(gr)
			} else {
				sec = res.Begin(gr)
			}
			sections[st.s] = &sec
		case "read":
			s.Read()
		case "write":
			if got := s.Write(); got != st.want {
				t.Fatalf("step %d: write of %s accepted=%v, want %v", i, st.s, got, st.want)
			}
		case "end":
			s.End()
		}
	}
	return res.Report()
}

func TestCheckerCountsConstructedHistories(t *testing.T) {
	// Sections are named by their grant order: a before b before c.
	for _, tc := range []struct {
		name    string
		guard   Guard
		history []step
		want    counts
	}{{
		name:  "sequential sections: nothing to count",
		guard: GuardNone,
		history: []step{
			begin("a", "k", 1), write("a", true), end("a"),
			begin("b", "k", 2), write("b", true), end("b"),
		},
	}, {
		name:  "a section that ended before the next grant is no overlap",
		guard: GuardNone,
		history: []step{
			begin("a", "k", 0), end("a"),
			begin("b", "k", 0), write("b", true), end("b"),
		},
	}, {
		name:  "two holders at once, none guard: overlap, stale write, lost update",
		guard: GuardNone,
		history: []step{
			begin("a", "k", 0), begin("b", "k", 0),
			write("a", true), end("a"), // a was superseded by b: stale
			write("b", true), end("b"), // b read 0 too: a's increment is lost
		},
		want: counts{overlaps: 1, staleAccepted: 1, lost: 1},
	}, {
		name:  "three holders at once count two overlaps",
		guard: GuardNone,
		history: []step{
			begin("a", "k", 0), begin("b", "k", 0), begin("c", "k", 0),
			write("a", true), write("b", true), write("c", true),
			end("a"), end("b"), end("c"),
		},
		want: counts{overlaps: 2, staleAccepted: 2, lost: 2},
	}, {
		name:  "a section granted while an older one is still active overlaps it even after others ended",
		guard: GuardNone,
		history: []step{
			begin("a", "k", 0), begin("b", "k", 0), write("b", true), end("b"),
			begin("c", "k", 0), write("c", true), end("c"),
			write("a", true), end("a"),
		},
		want: counts{overlaps: 2, staleAccepted: 1, lost: 2}, // a overwrote b's and c's increments
	}, {
		name:  "different keys never overlap",
		guard: GuardNone,
		history: []step{
			begin("a", "k1", 0), begin("b", "k2", 0),
			write("a", true), write("b", true), end("a"), end("b"),
		},
	}, {
		name:  "paused holder (GC pause), none guard: the stale write lands",
		guard: GuardNone,
		history: []step{
			begin("a", "k", 33), // a reads, then pauses past its TTL
			begin("b", "k", 34), write("b", true), end("b"),
			write("a", true), end("a"),
		},
		want: counts{overlaps: 1, staleAccepted: 1, lost: 1},
	}, {
		name:  "paused holder, fence guard: token 33 < 34 is rejected",
		guard: GuardFence,
		history: []step{
			begin("a", "k", 33),
			begin("b", "k", 34), write("b", true), end("b"),
			write("a", false), end("a"),
		},
		want: counts{overlaps: 1, staleRejected: 1},
	}, {
		name:  "paused holder, fence guard: rejected even before the newer holder writes",
		guard: GuardFence,
		history: []step{
			begin("a", "k", 33), begin("b", "k", 34),
			write("a", false), end("a"), write("b", true), end("b"),
		},
		want: counts{overlaps: 1, staleRejected: 1},
	}, {
		name:  "paused holder, cas guard: b's mark replaced a's",
		guard: GuardCAS,
		history: []step{
			begin("a", "k", 0),
			begin("b", "k", 0), write("b", true), end("b"),
			write("a", false), end("a"),
		},
		want: counts{overlaps: 1, staleRejected: 1},
	}, {
		name:  "pause before marking, cas guard: a marks over b and writes; b is refused",
		guard: GuardCAS,
		history: []step{
			grant("a", "k", 0), // a pauses before it marks
			begin("b", "k", 0),
			read("a"),         // a wakes and marks over b
			write("b", false), // the newest holder is refused
			write("a", true),  // the superseded holder's write lands
			end("b"), end("a"),
		},
		want: counts{overlaps: 1, staleAccepted: 1, rejectedCurrent: 1},
	}, {
		name:  "pause before reading, fence guard: the lower token stays refused",
		guard: GuardFence,
		history: []step{
			grant("a", "k", 33),
			begin("b", "k", 34),
			read("a"), write("b", true), write("a", false),
			end("b"), end("a"),
		},
		want: counts{overlaps: 1, staleRejected: 1},
	}, {
		name:  "token regression: a later grant below the previous token",
		guard: GuardNone,
		history: []step{
			begin("a", "k", 5), write("a", true), end("a"),
			begin("b", "k", 7), write("b", true), end("b"),
			begin("c", "k", 6), write("c", true), end("c"), // 6 after 7
			begin("d", "k", 8), write("d", true), end("d"), // 8 > 6: fine
		},
		want: counts{regressions: 1},
	}, {
		name:  "token regression under fence: the newest holder is refused",
		guard: GuardFence,
		history: []step{
			begin("a", "k", 7), write("a", true), end("a"),
			begin("b", "k", 7), write("b", true), end("b"), // equal is not above, but not below the max
			begin("c", "k", 6), write("c", false), end("c"),
		},
		want: counts{regressions: 2, rejectedCurrent: 1},
	}, {
		name:  "fence without tokens cannot fence",
		guard: GuardFence,
		history: []step{
			begin("a", "k", 0), begin("b", "k", 0),
			write("b", true), write("a", true), end("a"), end("b"),
		},
		want: counts{overlaps: 1, staleAccepted: 1, lost: 1, unfenced: 2},
	}, {
		name:  "a write without a read reads first; a second write changes nothing",
		guard: GuardNone,
		history: []step{
			grant("a", "k", 0), write("a", true), write("a", true), end("a"), end("a"),
			grant("b", "k", 0), write("b", true), end("b"),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := replay(t, tc.guard, tc.history)
			if got := countsOf(r); got != tc.want {
				t.Fatalf("counts %+v, want %+v\nexamples: %s", got, tc.want, strings.Join(r.Examples, "\n  "))
			}
			var sections int64
			for _, st := range tc.history {
				if st.op == "grant" || st.op == "begin" {
					sections++
				}
			}
			if r.Sections != sections {
				t.Fatalf("Sections = %d, want %d", r.Sections, sections)
			}
			if tc.want.overlaps+tc.want.staleAccepted+tc.want.regressions+tc.want.rejectedCurrent > 0 && len(r.Examples) == 0 {
				t.Fatal("violations without an example in words")
			}
		})
	}
}

func TestCheckerLostUpdatesAreAcceptedMinusCounter(t *testing.T) {
	// n holders all read 0 and all write 1: n-1 increments are lost.
	for _, n := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			res, _ := NewResource(GuardNone)
			secs := make([]Section, n)
			for i := range secs {
				secs[i] = res.Begin(Grant{Key: "k"})
			}
			for i := range secs {
				secs[i].Write()
				secs[i].End()
			}
			r := res.Report()
			if r.LostUpdates != int64(n-1) || r.Accepted != int64(n) || r.Overlaps != int64(n-1) {
				t.Fatalf("%d concurrent increments: lost %d, accepted %d, overlaps %d", n, r.LostUpdates, r.Accepted, r.Overlaps)
			}
		})
	}
}

func TestParseGuard(t *testing.T) {
	for _, s := range []string{"none", "fence", "cas"} {
		if g, err := ParseGuard(s); err != nil || string(g) != s {
			t.Fatalf("ParseGuard(%q) = %q, %v", s, g, err)
		}
	}
	_, err := ParseGuard("fencing")
	if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), `"fencing"`) {
		t.Fatalf("ParseGuard(fencing) = %v: want ErrInvalid naming the value", err)
	}
	if _, err := NewResource("fencing"); err == nil {
		t.Fatal("NewResource accepted an unknown guard")
	}
	if r, err := NewResource(""); err != nil || r.Guard() != GuardNone {
		t.Fatalf("NewResource(\"\") = %v, %v: want guard none", r, err)
	}
}
